-- 0008_wake_requests.sql - on-demand environments in database mode
-- (docs/wake.md, "Database mode"; issue 14). 0007 is another change's.
--
-- wake_requests: one row per wake edge asks the orchestrator for. The
-- host that won the conditional state change of its environment
--   UPDATE environments SET state = 'waking'
--   WHERE id = $1 AND state = 'sleeping' RETURNING id
-- inserts it and sends NOTIFY environment_wake ('ENV_ID REQUEST_ID'); the
-- orchestrator starts the environment, sets environments.state to
-- 'running' (with its endpoints) and the row's state to 'done', or
-- reports a failure: state 'failed' (and error), which every edge host
-- answers its waiting requests with as 503 wake_failed.
CREATE TABLE wake_requests (
    id bigserial PRIMARY KEY,
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    requested_by text NOT NULL, -- the edge host's host_name
    requested_at timestamptz NOT NULL DEFAULT now(),
    -- pending: asked; started: an orchestrator took it; done: the
    -- environment runs; failed: it could not be started (error says
    -- why); timeout: edge gave up waiting (wake.timeout)
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'started', 'done', 'failed', 'timeout')),
    taken_by text, -- the orchestrator that took it, if it says
    finished_at timestamptz,
    error text
);
CREATE INDEX wake_requests_environment
    ON wake_requests (environment_id, requested_at DESC);
CREATE INDEX wake_requests_open ON wake_requests (state)
    WHERE state IN ('pending', 'started');

-- environment_activity: each edge host's last activity per on-demand
-- environment (a request ending, a tunnel opening or closing) and its
-- open tunnels, so that an environment sleeps only once it is idle on
-- every host.
CREATE TABLE environment_activity (
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    edge_host text NOT NULL,
    last_activity timestamptz NOT NULL DEFAULT now(),
    open_tunnels integer NOT NULL DEFAULT 0,
    PRIMARY KEY (environment_id, edge_host)
);

-- request_events.cold_start_ms: how long a request waited for its
-- environment's wake (NULL: it did not wait; docs/analytics.md).
ALTER TABLE request_events ADD COLUMN cold_start_ms integer;
