-- 0013_wake_backoff.sql - a failed wake backs off, for the whole fleet
-- (docs/wake.md, "The back-off across the fleet"; issue 29).
--
-- A wake that fails (the orchestrator marks its row 'failed', or the
-- host that asked gives it up: 'timeout') left the environment
-- 'sleeping', and the next request on any host asked for a new wake at
-- once: a storm of requests on a broken environment asked the
-- orchestrator again and again. Now it also sets wake_retry_at, a
-- back-off that doubles with each failed wake in a row (wake_failures)
-- from 1 s up to the asking host's wake.retry_max
-- (wake_requests.retry_max_ms; 60 s when NULL), and no host asks for a
-- wake before wake_retry_at: each host's conditional update wins from
-- 'sleeping' only once wake_retry_at has passed (or is NULL), and a host
-- that loses to the back-off is told what is left of it (its requests
-- get 503 wake_failed with Retry-After). The state stays one of
-- running, sleeping, waking: a host of an older edge reads these rows
-- as before (it ignores the back-off).
-- A host whose woken endpoint fails its first request sets 'running' ->
-- 'sleeping' with the back-off itself (NOTIFY environment_sleep: the
-- orchestrator stops what it started; NOTIFY environment_wake_failed
-- 'ENV_ID RETRY_MS HOST': the other hosts back off too), or fails the
-- open row when the orchestrator has not answered yet; a wake that
-- serves its first request, or an environment that goes to sleep idle,
-- sets wake_failures back to 0.
ALTER TABLE environments
    ADD COLUMN wake_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN wake_retry_at timestamptz;

ALTER TABLE wake_requests ADD COLUMN retry_max_ms bigint;

-- 0009's trigger, with the back-off where it set 'sleeping' (the NOTIFY
-- is unchanged).
CREATE OR REPLACE FUNCTION edge_wake_request_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state
       AND OLD.state IN ('pending', 'started') THEN
        IF NEW.state IN ('failed', 'timeout') THEN
            UPDATE environments SET state = 'sleeping',
                   wake_failures = wake_failures + 1,
                   wake_retry_at = now() + least(
                       1000 * power(2, least(wake_failures, 20)),
                       coalesce(NEW.retry_max_ms, 60000))
                       * interval '1 millisecond'
             WHERE id = NEW.environment_id AND state = 'waking';
        END IF;
        PERFORM pg_notify('wake_request_change',
            NEW.environment_id || ' ' || NEW.id || ' ' || NEW.state);
    END IF;
    RETURN NULL;
END $$;
