-- 0024_environment_auth_request.sql - an environment's forward auth
-- (docs/gates.md, "Forward auth"; issue 34), the file's auth_request
-- group as a JSON object:
--   {"url": "http://127.0.0.1:9000/check", "timeout": "1s",
--    "copy_headers": ["X-Auth-User"], "cache_ttl": "1m"}
-- NULL: none. edged checks it as the file's group: a value it refuses
-- skips the environment (logged with its id, counted in
-- edge_db_rows_skipped_total{table="environments.rules"}), the rest
-- applied. A change is its project's, by the environments trigger.
ALTER TABLE environments
    ADD COLUMN auth_request jsonb
        CHECK (auth_request IS NULL OR jsonb_typeof(auth_request) = 'object');
