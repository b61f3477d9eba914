-- 0002_ip_rules_unique.sql - at most one rule per prefix: one global rule
-- per CIDR, one per CIDR in each project.
--
-- Every other source of rules already holds this (the state file refuses
-- a prefix twice, the configuration file refuses one in both ip_allow and
-- ip_block): two rows for one prefix would leave the longest-prefix match
-- with two answers. With these indexes a replace is one statement,
--   INSERT INTO ip_rules (...) VALUES (...)
--   ON CONFLICT (cidr) WHERE project_id IS NULL DO UPDATE SET ...
-- (ON CONFLICT (project_id, cidr) WHERE project_id IS NOT NULL for a
-- project's rule), as edgectl ip block|allow --pg does; an orchestrator
-- can do the same. Two partial indexes rather than one over
-- (cidr, project_id): NULLs are distinct in a unique index (before
-- PostgreSQL 15's NULLS NOT DISTINCT), so it would not stop two global
-- rules for one prefix.
--
-- A database that already holds two rules for one prefix fails this
-- migration (SQLSTATE 23505, naming the prefix); delete one and migrate
-- again.

CREATE UNIQUE INDEX ip_rules_global_cidr ON ip_rules (cidr)
    WHERE project_id IS NULL;
CREATE UNIQUE INDEX ip_rules_project_cidr ON ip_rules (project_id, cidr)
    WHERE project_id IS NOT NULL;
