-- Rollouts in flight per environment (docs/metrics.md, "Health"): rollouts whose turns, tool calls or scoring
-- spans are in the store but whose rl.rollout span is not (it is written when the rollout ends), how many and
-- the age of the oldest: now − the earliest start of its spans (a lower bound of its age). Environment is the
-- rl.environment its spans carry ('(unknown)' when none does: record it on turns to see this per
-- environment). "Now" as in liveness.sql: $now_ns when given, else the end of the run's newest span.
WITH as_of AS (
    SELECT coalesce($now_ns, (SELECT max(last_end_ns) FROM _process_activity($run_id))) AS now_ns
)
SELECT
    coalesce(o.environment, '(unknown)') AS environment,
    count(*) AS in_flight,
    max(n.now_ns - o.first_start_ns) / 1e9 AS oldest_age_s,
    arg_max(o.rollout_id, n.now_ns - o.first_start_ns) AS oldest_rollout_id,
    arg_max(o.instance_id, n.now_ns - o.first_start_ns) AS oldest_instance_id,
    any_value(n.now_ns) AS as_of_ns
FROM _open_rollouts($run_id) AS o, as_of AS n
WHERE $environment IS NULL OR o.environment = $environment
GROUP BY ALL
ORDER BY oldest_age_s DESC
