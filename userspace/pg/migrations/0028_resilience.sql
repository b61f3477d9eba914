-- 0028_resilience.sql - retries, circuit breaking, deadlines and activity
-- classes in the database (docs/upstream.md, docs/wake.md; issue 37): the
-- file's deployment, route and environment keys, as columns.
--
-- deployments.retry     NULL (no retry group) or a JSON object with the
--     keys, values and defaults of the file's retry group, checked by
--     edged with the same code (config_retry_of):
--       on       an array of "connect", "reset", "502", "503", "504"
--                (default all five)
--       max      an integer 0..3 (default 2)
--       budget   "N%", 0%..100% (default "20%")
--       backoff  a duration string, 1ms..10s (default "25ms")
--     e.g. '{"on": ["connect", "502"], "max": 1}'.
-- deployments.circuit   NULL (no circuit) or a JSON object, the file's
--     circuit group (config_circuit_of):
--       errors        "N%", 1%..100% (default "50%")
--       window        a duration string, 1s..1h (default "10s")
--       min_requests  an integer 1..1000000 (default 20)
--       open_for      a duration string, 100ms..1h (default "5s")
-- deployments.request_total  NULL (no deadline) or 1ms..1 day: the
--     file's timeouts.request_total, 504 deadline_exceeded past it.
-- A deployment whose retry, circuit or request_total edged refuses (not
-- an object, an unknown key, a wrong type, out of range) is served
-- without that setting, logged with the deployment's id and the reason,
-- and counted in edge_db_rows_skipped_total{table="deployments.upstream"}.
--
-- domains.wake, activity, request_total  a path-prefix row's (a route's)
--     wake = false (served only while its environment runs, else 503
--     environment_sleeping), activity 'app' or 'background', and
--     timeouts.request_total (NULL: the deployment's). A row without a
--     path_prefix keeps the defaults: its paths are the environment's
--     own. A row whose request_total edged refuses is skipped as one with
--     a bad path_prefix is (edge_db_rows_skipped_total{table="domains"}).
--
-- environments.idle_timeout_background  NULL (its idle_timeout) or
--     1s..7d: how long background requests may keep an on-demand
--     environment awake after its last app activity. A value out of range
--     skips the environment's row, as a bad idle_timeout does.
--
-- Changing any of them is an UPDATE of deployments, domains or
-- environments, which the triggers of 0001 (on every INSERT, UPDATE and
-- DELETE, for each row) note as a change of the project.
ALTER TABLE deployments ADD COLUMN retry jsonb;
ALTER TABLE deployments ADD COLUMN circuit jsonb;
ALTER TABLE deployments ADD COLUMN request_total interval;
ALTER TABLE domains ADD COLUMN wake boolean NOT NULL DEFAULT true;
ALTER TABLE domains ADD COLUMN activity text NOT NULL DEFAULT 'app'
    CHECK (activity IN ('app', 'background'));
ALTER TABLE domains ADD COLUMN request_total interval;
ALTER TABLE domains ADD CONSTRAINT domains_route_keys
    CHECK (path_prefix <> '' OR
           (wake AND activity = 'app' AND request_total IS NULL));
ALTER TABLE environments ADD COLUMN idle_timeout_background interval;
