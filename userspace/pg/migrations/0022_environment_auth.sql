-- 0022_environment_auth.sql - an environment's credential gate: API keys
-- and JWT (docs/gates.md; issue 34), the file's api_keys and jwt groups.
--
-- environments.api_keys  true: a request needs the key of one of the
--     environment's api_keys rows (none: every request is refused 401).
-- environments.jwt  NULL (none) or a JSON object of the file's jwt keys:
--     {"keys": a JWKS object or a string of PEM public keys,
--      "issuer": "...", "audience": "...", "algorithms": ["RS256"],
--      "leeway": "30s", "copy_claims": ["sub"]}.
-- api_keys  one row a key: its environment, a name (letters, digits,
--     -_.@; sent upstream as X-Api-Key-Name) and the SHA-256 of the key
--     in lowercase hex; edge never sees the key itself. Deleting the row
--     revokes the key on every host at the next sync.
-- edged checks them as the file's: an environment whose jwt it refuses is
-- logged with its id and the reason, counted in
-- edge_db_rows_skipped_total{table="environments.rules"} and left out,
-- the rest applied; an api_keys row it refuses is skipped alone. A change
-- of api_keys is a change of its environment's project.
ALTER TABLE environments
    ADD COLUMN api_keys boolean NOT NULL DEFAULT false,
    ADD COLUMN jwt jsonb CHECK (jwt IS NULL OR jsonb_typeof(jwt) = 'object');

CREATE TABLE api_keys (
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    name text NOT NULL CHECK (name ~ '^[A-Za-z0-9._@-]{1,63}$'),
    key_sha256 text NOT NULL CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, name),
    UNIQUE (environment_id, key_sha256)
);

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION edge_domains_change();

-- TRUNCATE noted as 0003 does for the other routing tables.
CREATE FUNCTION edge_api_keys_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM edge_note_change('project', p)
       FROM (SELECT DISTINCT e.project_id AS p FROM api_keys x
               JOIN environments e ON e.id = x.environment_id) s;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION edge_api_keys_truncate();
