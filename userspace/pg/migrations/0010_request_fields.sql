-- 0010_request_fields.sql - what a proxied request's upstream answered,
-- and the request's HTTP version.
--
-- request_events.upstream_addr is the endpoint edge sent the request to
-- last ("10.0.0.1:8080", "[2001:db8::1]:80"), upstream_status the status
-- of that endpoint's final response (beside status, which is what edge
-- sent the client: a 502 edge answered for a bad response has the
-- upstream's status here, or NULL when none came), both NULL for
-- answers edge gave itself; http_version is "HTTP/1.1" or "HTTP/1.0",
-- NULL when no request line was read (docs/analytics.md).
ALTER TABLE request_events ADD COLUMN upstream_addr text,
    ADD COLUMN upstream_status smallint,
    ADD COLUMN http_version text;
