-- 0001_control_plane.sql - edge's control-plane schema, version 1.
--
-- The tables and columns that orchestrators write (projects, environments,
-- deployments, endpoints, domains, ip_rules) are edge's public interface:
-- docs/control-plane.md documents them. edge itself writes edge_hosts and
-- request_events, and the triggers write edge_change_log and NOTIFY.
--
-- Every transaction that changes routes or IP rules takes one change
-- version (edge_change_seq, once per transaction), logs what it changed in
-- edge_change_log and NOTIFYs project_route_change ("VERSION PROJECT_ID")
-- or ip_rule_change ("VERSION RULE_ID"): ids and a version, never whole
-- rows (NOTIFY's payload is at most 8000 bytes). Notifications with the
-- same payload in one transaction are delivered once.

CREATE TABLE edge_schema (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by text
);

CREATE SEQUENCE edge_change_seq;

CREATE TABLE projects (
    id text PRIMARY KEY,
    name text,
    enabled boolean NOT NULL DEFAULT true
);

CREATE TABLE environments (
    id text PRIMARY KEY,
    project_id text NOT NULL REFERENCES projects ON DELETE CASCADE,
    name text,
    on_demand boolean DEFAULT false,
    state text DEFAULT 'running',
    idle_timeout interval
);
CREATE INDEX environments_project ON environments (project_id);

CREATE TABLE deployments (
    id text PRIMARY KEY,
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    active boolean NOT NULL DEFAULT false,
    -- at most one active per environment, checked at commit, so that
    --   UPDATE deployments SET active = (id = $new) WHERE environment_id = $env
    -- switches in one statement whatever order the rows are visited in
    CONSTRAINT deployments_one_active EXCLUDE USING btree
        (environment_id WITH =) WHERE (active)
        DEFERRABLE INITIALLY DEFERRED
);

CREATE TABLE endpoints (
    deployment_id text NOT NULL REFERENCES deployments ON DELETE CASCADE,
    address text NOT NULL -- host:port
);
CREATE INDEX endpoints_deployment ON endpoints (deployment_id);

CREATE TABLE domains (
    domain text NOT NULL, -- exact, or *.suffix
    path_prefix text NOT NULL DEFAULT '',
    strip_prefix boolean DEFAULT false,
    environment_id text NOT NULL REFERENCES environments ON DELETE CASCADE,
    PRIMARY KEY (domain, path_prefix)
);
CREATE INDEX domains_environment ON domains (environment_id);

CREATE TABLE ip_rules (
    id bigserial PRIMARY KEY,
    cidr cidr NOT NULL,
    action text NOT NULL CHECK (action IN ('block', 'allow')),
    -- NULL: every host's XDP maps; else that project's routes
    project_id text NULL REFERENCES projects ON DELETE CASCADE,
    expires_at timestamptz NULL,
    comment text
);
CREATE INDEX ip_rules_project ON ip_rules (project_id);

-- What changed, by version: a host that has applied version V catches up
-- by reading the entries above V (kind 'project': key is a project id;
-- kind 'ip_rule': key is a rule id).
CREATE TABLE edge_change_log (
    version bigint NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (version, kind, key)
);

-- The fleet: each edged registers itself and reports every few seconds.
CREATE TABLE edge_hosts (
    name text PRIMARY KEY,
    edge_version text,
    started_at timestamptz,
    last_seen timestamptz,
    applied_version bigint,  -- the change version its table holds
    route_generation bigint,
    database_up boolean,
    xdp_counters jsonb,      -- {"passed": N, "dropped_rule": N, ...}
    rule_hits jsonb          -- {"RULE_ID": hits, ...}
);

-- One analytics event per request or tunnel (docs/analytics.md).
CREATE TABLE request_events (
    request_id text NOT NULL UNIQUE,
    time timestamptz NOT NULL,
    edge_host text,
    kind text NOT NULL, -- request or tunnel
    project_id text,
    environment_id text,
    deployment_id text,
    host text,
    method text,
    path text,
    status smallint,
    bytes_in bigint,
    bytes_out bigint,
    duration_us bigint,
    upstream_us bigint,
    client_ip text,
    user_agent text,
    referrer text,
    tls_version text,
    outcome text NOT NULL
);
CREATE INDEX request_events_time ON request_events (time);

-- The transaction's change version: the first change takes one from the
-- sequence, the rest of the transaction reuses it.
CREATE FUNCTION edge_tx_version() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v text := current_setting('edge.tx_version', true);
BEGIN
    IF v IS NULL OR v = '' THEN
        v := nextval('edge_change_seq')::text;
        PERFORM set_config('edge.tx_version', v, true);
    END IF;
    RETURN v::bigint;
END $$;

CREATE FUNCTION edge_note_change(p_kind text, p_key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v bigint := edge_tx_version();
BEGIN
    IF p_key IS NULL THEN
        RETURN; -- a row whose parent went with it: the parent's change
    END IF;
    INSERT INTO edge_change_log (version, kind, key)
        VALUES (v, p_kind, p_key) ON CONFLICT DO NOTHING;
    PERFORM pg_notify(CASE p_kind WHEN 'ip_rule' THEN 'ip_rule_change'
                      ELSE 'project_route_change' END,
                      v::text || ' ' || p_key);
END $$;

-- The project a row of a routing table belongs to (NULL when its parent
-- is already gone: a cascade, noted by the parent's own change).
CREATE FUNCTION edge_project_of(p_table text, p_key text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE p_table
        WHEN 'projects' THEN p_key
        WHEN 'environments' THEN
            (SELECT project_id FROM environments WHERE id = p_key)
        WHEN 'deployments' THEN
            (SELECT e.project_id FROM deployments d
               JOIN environments e ON e.id = d.environment_id
              WHERE d.id = p_key)
        END
$$;

-- One trigger function per table: which project (or rule) a row's change
-- touches, before and after (a row may move to another parent).
CREATE FUNCTION edge_projects_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('project', OLD.id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('project', NEW.id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION edge_environments_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('project', OLD.project_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('project', NEW.project_id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION edge_deployments_change() RETURNS trigger
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

CREATE FUNCTION edge_endpoints_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('project',
            edge_project_of('deployments', OLD.deployment_id));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('project',
            edge_project_of('deployments', NEW.deployment_id));
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION edge_domains_change() RETURNS trigger
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

-- A rule is noted by id (the XDP maps of every host) and, for a project's
-- rule, as a change of that project (its routes carry it).
CREATE FUNCTION edge_ip_rules_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM edge_note_change('ip_rule', OLD.id::text);
        PERFORM edge_note_change('project', OLD.project_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM edge_note_change('ip_rule', NEW.id::text);
        PERFORM edge_note_change('project', NEW.project_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON projects
    FOR EACH ROW EXECUTE FUNCTION edge_projects_change();
CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON environments
    FOR EACH ROW EXECUTE FUNCTION edge_environments_change();
CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON deployments
    FOR EACH ROW EXECUTE FUNCTION edge_deployments_change();
CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON endpoints
    FOR EACH ROW EXECUTE FUNCTION edge_endpoints_change();
CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON domains
    FOR EACH ROW EXECUTE FUNCTION edge_domains_change();
CREATE TRIGGER edge_change AFTER INSERT OR UPDATE OR DELETE ON ip_rules
    FOR EACH ROW EXECUTE FUNCTION edge_ip_rules_change();
