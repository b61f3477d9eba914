-- 0021_request_auth.sql - the credential a request presented to its
-- environment's or route's gate (docs/gates.md; issue 34), in its
-- analytics row.
--
-- request_events.auth  'api_key' or 'jwt' (admitted with it, or refused
--     401 unauthorized: outcome says which); NULL: no gate, or none
--     presented.
ALTER TABLE request_events ADD COLUMN auth text;
