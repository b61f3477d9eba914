-- 0019_environment_challenge.sql - an environment's proof-of-work
-- challenge (docs/gates.md; issue 34): the file's challenge group, as
-- columns.
--
-- environments.challenge_mode  'off' (default), 'new_ip',
--     'on_rate_limit' or 'always' (the owner's attack mode: set it to
--     'always' during an attack, back after).
-- environments.challenge_difficulty  leading zero bits of a solution,
--     1..28 (default 18).
-- environments.challenge_ttl  how long a pass lasts, 1 minute..30 days
--     (default 24 hours).
-- edged checks them as the file's: an environment whose values it
-- refuses (say, a CHECK dropped) is logged with its id and the reason,
-- counted in edge_db_rows_skipped_total{table="environments.rules"} and
-- left out, the rest applied. An edged before 0019 ignores them.
ALTER TABLE environments
    ADD COLUMN challenge_mode text NOT NULL DEFAULT 'off'
        CHECK (challenge_mode IN ('off', 'new_ip', 'on_rate_limit', 'always')),
    ADD COLUMN challenge_difficulty integer NOT NULL DEFAULT 18
        CHECK (challenge_difficulty BETWEEN 1 AND 28),
    ADD COLUMN challenge_ttl interval NOT NULL DEFAULT '24 hours'
        CHECK (challenge_ttl BETWEEN interval '1 minute' AND interval '30 days');
