-- 0007_certificates.sql - TLS certificates from the database, served
-- beside the configuration file's (docs/tls.md, "Certificates from the
-- database").
--
-- A row is one certificate: chain_pem the PEM certificates, the leaf
-- first, then its chain (each signed by the next); key_pem the leaf's
-- unencrypted PEM private key (RSA or EC); ocsp an optional DER OCSP
-- response to staple; names the DNS names it is to serve, each of which
-- must be in the leaf's subjectAltName (an empty array: every DNS name
-- of the subjectAltName). edged checks a row as it checks a file (the
-- key matching, valid now, the chain leading to its issuer, the OCSP
-- response for this certificate); a row that fails is refused alone,
-- logged and counted with its id, and the certificate that row last had
-- while it was good serves on.
--
-- Changes take the transaction's change version, are logged in
-- edge_change_log (kind 'certificate', key the row's id) and NOTIFY
-- certificate_change ("VERSION ID"), so a change applies at once and the
-- periodic version check and the fetch after a reconnect catch up on a
-- notification lost.

CREATE TABLE certificates (
    id bigserial PRIMARY KEY,
    names text[] NOT NULL DEFAULT '{}',
    chain_pem text NOT NULL,
    key_pem text NOT NULL,
    ocsp bytea NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    comment text
);

-- the notification's channel by kind: certificate_change added
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
                      ELSE 'project_route_change' END,
                      v::text || ' ' || p_key);
END $$;

CREATE FUNCTION edge_certificates_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM edge_note_change('certificate', id::text) FROM certificates;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('certificate', OLD.id::text);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('certificate', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON certificates
    FOR EACH ROW EXECUTE FUNCTION edge_certificates_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON certificates
    FOR EACH STATEMENT EXECUTE FUNCTION edge_certificates_change();

-- Per environment, as the configuration file's security_headers: a
-- plain HTTP request answered 308 to its https:// URL (https_redirect),
-- and Strict-Transport-Security on HTTPS answers (hsts; max-age one
-- year, as the file's default). A change is its project's, by the
-- environments trigger of 0001.
ALTER TABLE environments ADD COLUMN https_redirect boolean NOT NULL DEFAULT false,
    ADD COLUMN hsts boolean NOT NULL DEFAULT false;
