-- 0027_request_attempts.sql - how many upstream attempts a request made
-- (docs/upstream.md, "Retries"; issue 37), in its analytics row.
--
-- request_events.attempts  the endpoints chosen for the request: 1 when
--     the first answered, more when it went again (a failed connect, a
--     reset, a retried 5xx, a pooled connection the upstream had closed);
--     NULL when none was chosen (answered by edge, a TCP route's).
ALTER TABLE request_events ADD COLUMN attempts smallint;
