-- 0026_acme.sql - certificates that issue themselves (docs/acme.md):
-- which environments want them, where edge's ACME manager keeps them, one
-- host of a fleet ordering a name at a time, and the challenges every
-- host answers.
--
-- environments.tls  NULL: the environment's certificates come from
--     elsewhere (files, certificates rows an operator writes); 'auto':
--     edge orders them from its ACME CA for the environment's domains.
--     A change is its project's, by the environments trigger of 0001
--     (every column of the row). An edged before 0026 ignores it.
-- certificates.acme_name  the name edge's ACME manager keeps that row for
--     (one row per name, upserted by it; NULL for rows an operator
--     wrote). Its changes go the certificates' way (0007: kind
--     'certificate', NOTIFY certificate_change).
-- acme_leases  one row per name being ordered: holder (a host_name) has
--     it until expires_at; another host takes it only once it expired.
--     edge's alone; no trigger.
-- acme_challenges  a challenge some host's order published (token, the
--     name it proves, http-01 or tls-alpn-01, the key authorization),
--     answered by every host until expires_at. A change NOTIFYs
--     acme_challenge_change (payload the token, '' for a TRUNCATE: only a
--     wake-up), and every edged reads the rows not expired again. Not
--     versioned in edge_change_log: challenges live minutes, and a
--     listener reads the whole table (a few rows) at every (re)connect
--     and every notification, so a notification lost while it was away
--     is caught up by the read at the reconnect.
ALTER TABLE environments ADD COLUMN tls text NULL
    CHECK (tls IS NULL OR tls = 'auto');

ALTER TABLE certificates ADD COLUMN acme_name text NULL UNIQUE;

CREATE TABLE acme_leases (
    name text PRIMARY KEY,
    holder text NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE acme_challenges (
    token text PRIMARY KEY,
    name text NOT NULL,
    type text NOT NULL CHECK (type IN ('http-01', 'tls-alpn-01')),
    key_authorization text NOT NULL,
    holder text NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE FUNCTION edge_acme_challenges_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('acme_challenge_change', '');
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('acme_challenge_change', left(OLD.token, 256));
    ELSE
        PERFORM pg_notify('acme_challenge_change', left(NEW.token, 256));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE
    ON acme_challenges FOR EACH ROW
    EXECUTE FUNCTION edge_acme_challenges_change();
CREATE TRIGGER edge_truncate AFTER TRUNCATE ON acme_challenges
    FOR EACH STATEMENT EXECUTE FUNCTION edge_acme_challenges_change();
