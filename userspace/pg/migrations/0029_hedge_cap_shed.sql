-- 0029_hedge_cap_shed.sql - hedging, per-endpoint caps and brownout
-- shedding in the database (docs/upstream.md; issue 37): the file's
-- deployment hedge and max_inflight and its environment and route shed,
-- as columns.
--
-- deployments.hedge     NULL (no hedging) or a JSON object with the keys,
--     values and defaults of the file's hedge group, checked by edged
--     with the same code (config_hedge_of):
--       after  "pNN" (a percentile, p50..p99) or a duration string,
--              1ms..60s (default "p95")
--       max    an integer 1..3 (default 1)
--     e.g. '{"after": "50ms"}'.
-- deployments.max_inflight  NULL or 0 (no cap) or 1..1000000: each of
--     its endpoints' requests in flight at most (the file's
--     max_inflight; a CHECK).
-- A deployment whose hedge or max_inflight edged refuses (not an object,
-- an unknown key, a wrong type, out of range; a max_inflight out of
-- range with the CHECK dropped) is served without that setting, logged
-- with the deployment's id and the reason, and counted in
-- edge_db_rows_skipped_total{table="deployments.upstream"}.
--
-- environments.shed  true: while a worker's loop lags
--     (limits.brownout_lag) its new requests are answered 503 overloaded
--     (the file's environment shed).
-- domains.shed  a path-prefix row's (a route's) own shed; NULL: its
--     environment's. A row without a path_prefix keeps it NULL: its
--     paths are the environment's own (a CHECK).
--
-- Changing any of them is an UPDATE of deployments, domains or
-- environments, which the triggers of 0001 (on every INSERT, UPDATE and
-- DELETE, for each row) note as a change of the project.
ALTER TABLE deployments ADD COLUMN hedge jsonb;
ALTER TABLE deployments ADD COLUMN max_inflight integer
    CHECK (max_inflight BETWEEN 0 AND 1000000);
ALTER TABLE environments ADD COLUMN shed boolean NOT NULL DEFAULT false;
ALTER TABLE domains ADD COLUMN shed boolean;
ALTER TABLE domains ADD CONSTRAINT domains_shed_route
    CHECK (path_prefix <> '' OR shed IS NULL);
