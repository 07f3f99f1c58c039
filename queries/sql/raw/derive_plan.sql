-- How a run's new segments (already loaded) change its derived tables. full_rebuild: derive the run whole
-- (derive_full.sql) rather than only the rollouts they touch (derive_scope.sql, derive_delta.sql), for a run the
-- reader held no spans of, the run's first rl.sample spans (every rollout's step and stages switch from
-- derived to recorded), or a staleness bound above the one the stages were judged against. recorded: the run
-- has rl.sample spans, which the touched rollouts' own spans may not show.
WITH new AS (
    SELECT name, staleness_bound FROM _spans WHERE run_id = $run AND _segment IN (SELECT unnest($segments))
),
old AS (
    SELECT name FROM _spans WHERE run_id = $run AND _segment NOT IN (SELECT unnest($segments))
),
judged AS (
    SELECT max(staleness_bound) AS bound FROM _rollout_stages_mat WHERE run_id = $run
)
SELECT
    NOT EXISTS (SELECT 1 FROM old)
    OR (EXISTS (SELECT 1 FROM new WHERE name = 'rl.sample') AND NOT EXISTS (SELECT 1 FROM old WHERE name = 'rl.sample'))
    OR coalesce((SELECT max(staleness_bound) FROM new) > coalesce((SELECT bound FROM judged), -1), false)
    AS full_rebuild,
    EXISTS (SELECT 1 FROM old WHERE name = 'rl.sample') OR EXISTS (SELECT 1 FROM new WHERE name = 'rl.sample')
    AS recorded
