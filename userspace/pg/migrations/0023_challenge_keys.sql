-- 0023_challenge_keys.sql - the proof-of-work challenge's signing keys for
-- the whole fleet (docs/gates.md, "Keys"; issue 34), in place of each
-- host's challenge.key_file.
--
-- A row is one key: key_hex 32 random bytes in lowercase hex (openssl
-- rand -hex 32), signs_from when it starts signing. At any time edge
-- signs with the newest key whose signs_from has come, and verifies with
-- it and one more: the next key to start signing, else the one that
-- signed before. So a rotation is: insert the new key with signs_from a
-- few minutes ahead (every host verifies it from the next sync, before
-- any host signs with it), and delete the oldest once the new one signs.
-- A host's challenge.key_file, when set, wins over this table. edge reads
-- the 64 rows with the latest signs_from.
--
-- Changes are noted as the certificates' are (kind 'challenge_key'; the
-- certificate_change channel): every host reads the table again.
CREATE TABLE challenge_keys (
    id bigserial PRIMARY KEY,
    key_hex text NOT NULL CHECK (key_hex ~ '^[0-9a-f]{64}$'
                                 AND key_hex <> repeat('0', 64)),
    signs_from timestamptz NOT NULL DEFAULT now()
        CHECK (isfinite(signs_from)),
    created_at timestamptz NOT NULL DEFAULT now(),
    comment text
);

CREATE OR REPLACE FUNCTION edge_note_change(p_kind text, p_key text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v bigint := edge_tx_version();
BEGIN
    IF p_key IS NULL THEN
        RETURN; -- a row whose parent went with it: the parent's change
    END IF;
    INSERT INTO edge_change_log (version, kind, key)
        VALUES (v, p_kind, p_key) ON CONFLICT DO NOTHING;
    PERFORM pg_notify(CASE p_kind WHEN 'ip_rule' THEN 'ip_rule_change'
                      WHEN 'certificate' THEN 'certificate_change'
                      WHEN 'challenge_key' THEN 'certificate_change'
                      ELSE 'project_route_change' END,
                      v::text || ' ' || p_key);
END $$;

CREATE FUNCTION edge_challenge_keys_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM edge_note_change('challenge_key', id::text)
           FROM challenge_keys;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('challenge_key', OLD.id::text);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('challenge_key', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE
    ON challenge_keys FOR EACH ROW EXECUTE FUNCTION edge_challenge_keys_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON challenge_keys
    FOR EACH STATEMENT EXECUTE FUNCTION edge_challenge_keys_change();
