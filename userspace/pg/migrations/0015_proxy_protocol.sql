-- 0015_proxy_protocol.sql - the PROXY protocol to and from the database's
-- routes (docs/operations.md, "Behind a load balancer"; issue 32): the
-- file's deployment send_proxy and tcp_routes proxy_protocol and
-- send_proxy, as columns.
--
-- deployments.send_proxy  'off' (the default), 'v1' or 'v2': every new
--     connection edged opens to the deployment's endpoints begins with a
--     PROXY protocol header naming the client (health checks: a v2 LOCAL
--     header; v1 names the check's own socket).
-- tcp_routes.send_proxy   NULL (the deployment's), 'off', 'v1' or 'v2':
--     the same for the route's connections.
-- tcp_routes.proxy_protocol  whether the connections accepted on the
--     route's listen address begin with a PROXY header (taken only from
--     trusted_proxies); the routes of one address agree (edged refuses a
--     row that does not, logged and counted).
-- The CHECKs refuse a bad value at the writer; edged checks again (a row
-- it refuses is logged and counted, the others go on).
ALTER TABLE deployments ADD COLUMN send_proxy text NOT NULL DEFAULT 'off'
    CHECK (send_proxy IN ('off', 'v1', 'v2'));
ALTER TABLE tcp_routes ADD COLUMN send_proxy text NULL
    CHECK (send_proxy IN ('off', 'v1', 'v2'));
ALTER TABLE tcp_routes ADD COLUMN proxy_protocol boolean NOT NULL
    DEFAULT false;
