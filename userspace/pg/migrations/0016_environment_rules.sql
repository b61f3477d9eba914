-- 0016_environment_rules.sql - an environment's header rules, redirects
-- and unmatched paths (docs/configuration.md, "headers", "redirects";
-- issue 33): the file's environment groups, as columns.
--
-- environments.headers    NULL (none) or a JSON object of the lists
--     request_set, request_remove, response_set, response_add,
--     response_remove, each an array of strings as the file writes them
--     ("Name: value", or "Name" to remove), e.g.
--     '{"response_set": ["Cache-Control: no-store"]}'.
-- environments.redirects  NULL (none) or a JSON array of objects
--     {"from": "/old/*", "to": "https://new.example$path$query",
--      "status": 301} (status 301 by default; 302, 307, 308).
-- environments.unmatched  'deployment' (the default: a path no route
--     matches goes to the deployment) or 'not_found' (a 404).
-- edged checks every entry as the file's; an environment whose value it
-- refuses is logged with its id and the reason, counted in
-- edge_db_rows_skipped_total{table="environments.rules"} and left out
-- (its domains are not served by it), the rest applied. Changing them is
-- an UPDATE of environments, which the trigger of 0001 notes as a change
-- of the project.
ALTER TABLE environments ADD COLUMN headers jsonb;
ALTER TABLE environments ADD COLUMN redirects jsonb;
ALTER TABLE environments ADD COLUMN unmatched text NOT NULL
    DEFAULT 'deployment' CHECK (unmatched IN ('deployment', 'not_found'));
