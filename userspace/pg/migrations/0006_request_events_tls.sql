-- 0006_request_events_tls.sql - what a request's TLS negotiated.
--
-- request_events.tls_cipher is the cipher suite of the connection
-- (TLS_AES_256_GCM_SHA384, ECDHE-ECDSA-AES128-GCM-SHA256, ...) and
-- tls_resumed whether its session was resumed from a ticket; both NULL
-- for plain HTTP, beside tls_version (docs/analytics.md).
ALTER TABLE request_events ADD COLUMN tls_cipher text,
    ADD COLUMN tls_resumed boolean;
