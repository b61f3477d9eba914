-- 0005_tcp_routes.sql - TCP and TLS passthrough routes from the database,
-- beside the configuration file's tcp_routes (docs/configuration.md).
--
-- A row is a listen address whose connections edged does not parse: each
-- goes, as a byte tunnel, to an endpoint of the environment's active
-- deployment. With sni, a TLS passthrough route: the server name of the
-- client's ClientHello picks it among the routes with sni on the same
-- address. The values follow the file's rules, checked by edged (a row
-- that breaks them is refused alone, logged and counted):
--   listen  "A.B.C.D:PORT" or "[IPV6]:PORT", numeric, port 1..65535
--   sni     NULL (a plain TCP route, the address to itself), a domain,
--           "*.domain" (one label more) or "*" (the address's default)
--
-- A row belongs to its environment's project: its changes take the
-- transaction's change version, are logged in edge_change_log and NOTIFY
-- project_route_change with that project's id, as the rows of domains do,
-- so the periodic version check, the snapshot after a reconnect and the
-- local snapshot cover them like every other routing row.

CREATE TABLE tcp_routes (
    id bigserial PRIMARY KEY,
    listen text NOT NULL,
    sni text NULL,
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    comment text
);
CREATE INDEX tcp_routes_environment ON tcp_routes (environment_id);
-- one route per address and name, as written (edged also refuses two rows
-- that are one route once normalised: "A.example.com" and "a.example.com")
CREATE UNIQUE INDEX tcp_routes_listen_sni ON tcp_routes (listen, coalesce(sni, ''));

CREATE FUNCTION edge_tcp_routes_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('project',
            edge_project_of('environments', OLD.environment_id));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('project',
            edge_project_of('environments', NEW.environment_id));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON tcp_routes
    FOR EACH ROW EXECUTE FUNCTION edge_tcp_routes_change();

-- TRUNCATE noted as 0003 does for the other routing tables: its function
-- again, with a branch for tcp_routes (a CASE without it would raise).
CREATE OR REPLACE FUNCTION edge_truncate_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    CASE TG_TABLE_NAME
    WHEN 'projects' THEN
        PERFORM edge_note_change('project', id) FROM projects;
    WHEN 'environments' THEN
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT project_id AS p FROM environments) s;
    WHEN 'deployments' THEN
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT e.project_id AS p FROM deployments d
                   JOIN environments e ON e.id = d.environment_id) s;
    WHEN 'endpoints' THEN
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT e.project_id AS p FROM endpoints x
                   JOIN deployments d ON d.id = x.deployment_id
                   JOIN environments e ON e.id = d.environment_id) s;
    WHEN 'domains' THEN
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT e.project_id AS p FROM domains x
                   JOIN environments e ON e.id = x.environment_id) s;
    WHEN 'tcp_routes' THEN
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT e.project_id AS p FROM tcp_routes x
                   JOIN environments e ON e.id = x.environment_id) s;
    WHEN 'ip_rules' THEN
        PERFORM edge_note_change('ip_rule', id::text) FROM ip_rules;
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT project_id AS p FROM ip_rules
                  WHERE project_id IS NOT NULL) s;
    END CASE;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON tcp_routes
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
