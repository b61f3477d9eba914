-- 0009_wake_request_change.sql - the wake protocol's answer to every edge
-- host (docs/wake.md, "Database mode"; issue 14).
--
-- An open wake_requests row (pending or started) that the orchestrator,
-- or the edge host that asked, moves to another state sends
--   NOTIFY wake_request_change, 'ENV_ID REQUEST_ID STATE'
-- in the same transaction. Every edged LISTENs to it: 'failed' answers
-- each host's waiting requests for that environment with 503 wake_failed
-- at once, 'timeout' (the asking host gave up) with wake_pending; 'done'
-- needs nothing (the environment's endpoints and state come by the route
-- change, and each host's readiness probe sees the port open).
--
-- A failed or timed out wake leaves nobody starting the environment: its
-- environments.state goes back from 'waking' to 'sleeping' here, so that
-- the next request's conditional update can win again. Only open rows
-- notify: a row edge already gave up on (timeout) that an orchestrator
-- marks failed later says nothing to a newer wake.
CREATE FUNCTION edge_wake_request_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state
       AND OLD.state IN ('pending', 'started') THEN
        IF NEW.state IN ('failed', 'timeout') THEN
            UPDATE environments SET state = 'sleeping'
             WHERE id = NEW.environment_id AND state = 'waking';
        END IF;
        PERFORM pg_notify('wake_request_change',
            NEW.environment_id || ' ' || NEW.id || ' ' || NEW.state);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_wake_request_change AFTER UPDATE ON wake_requests
    FOR EACH ROW EXECUTE FUNCTION edge_wake_request_change();
