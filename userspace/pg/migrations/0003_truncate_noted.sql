-- 0003_truncate_noted.sql - TRUNCATE of a routing table or ip_rules is a
-- change like DELETE: noted in edge_change_log and NOTIFYed.
--
-- Row triggers do not fire on TRUNCATE, so before this a TRUNCATE domains
-- took no change version and sent nothing: every host kept routing the
-- truncated rows, and the periodic version check could not notice either
-- (no version moved). A BEFORE TRUNCATE trigger still sees the rows, so it
-- notes exactly what a DELETE of them would: each project they belong to
-- and, for ip_rules, each rule. (A TRUNCATE ... CASCADE fires the trigger
-- of every table it truncates, before any of them is emptied.)

CREATE FUNCTION edge_truncate_change() RETURNS trigger
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
    WHEN 'ip_rules' THEN
        PERFORM edge_note_change('ip_rule', id::text) FROM ip_rules;
        PERFORM edge_note_change('project', p)
           FROM (SELECT DISTINCT project_id AS p FROM ip_rules
                  WHERE project_id IS NOT NULL) s;
    END CASE;
    RETURN NULL;
END $$;

CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON projects
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON environments
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON deployments
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON endpoints
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON domains
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
CREATE TRIGGER edge_truncate BEFORE TRUNCATE ON ip_rules
    FOR EACH STATEMENT EXECUTE FUNCTION edge_truncate_change();
