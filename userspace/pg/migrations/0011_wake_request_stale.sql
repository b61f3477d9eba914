-- 0011_wake_request_stale.sql - a wake whose host died (docs/wake.md,
-- "Database mode", "A stale waking"; issue 14).
--
-- The host that wins an environment's wake inserts its wake_requests
-- row and gives it up ('timeout') at its own wake.timeout. A host that
-- died first leaves the row open (pending or started) and the
-- environment 'waking', and every other host would lose every
-- conditional update and wait for a wake nobody watches. So a host
-- asking for the wake of an environment still 'waking' with an open row
-- older than its wake.timeout plus a margin closes that row as 'stale'
-- and takes the wake over, in the statement that asks (one host wins:
-- the others wait for the old row's lock and find it closed). 'stale'
-- is neither failed nor timeout: the trigger of 0009 leaves the
-- environment 'waking' (the new wake is under way) and the hosts'
-- waiting requests keep waiting for it; its NOTIFY
-- wake_request_change 'ENV_ID REQUEST_ID stale' asks nothing of them.
ALTER TABLE wake_requests DROP CONSTRAINT wake_requests_state_check,
    ADD CONSTRAINT wake_requests_state_check CHECK (state IN
        ('pending', 'started', 'done', 'failed', 'timeout', 'stale'));
