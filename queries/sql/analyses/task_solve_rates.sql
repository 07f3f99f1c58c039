-- Per task (docs/metrics.md, "Learning"): scored attempts, successes (reward at least $success_threshold), the
-- solve rate, the first and last consuming step it was attempted at, the solve rate early and late in its
-- attempts (early: attempts at steps before which it had had fewer than half of its attempts; late: the rest;
-- did training move it?), and its curriculum status (_solve_status, macros/09_learning.sql): 'always solved',
-- 'never solved' or 'mixed'. Counted from the scored rollouts per step, task and reward value kept ahead
-- (_reward_counts, macros/09_learning.sql).
WITH per_step AS (  -- a task's attempts come in groups: one row per task and step first
    SELECT
        task,
        step,
        sum(scored) AS attempts,
        coalesce(sum(scored) FILTER (reward >= $success_threshold), 0) AS successes
    FROM _reward_counts($run_id)
    WHERE task IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY ALL
),
ranked AS (
    SELECT
        *,
        sum(attempts) OVER (PARTITION BY task ORDER BY step NULLS LAST ROWS UNBOUNDED PRECEDING) - attempts
            AS before,
        sum(attempts) OVER (PARTITION BY task) AS total
    FROM per_step
)
SELECT
    task,
    sum(attempts)::BIGINT AS attempts,
    sum(successes)::BIGINT AS successes,
    sum(successes) / sum(attempts) AS solve_rate,
    min(step) AS first_step,
    max(step) AS last_step,
    sum(successes) FILTER (2 * before < total) / sum(attempts) FILTER (2 * before < total) AS early_solve_rate,
    sum(successes) FILTER (2 * before >= total) / sum(attempts) FILTER (2 * before >= total) AS late_solve_rate,
    _solve_status(sum(successes), sum(attempts)) AS status
FROM ranked
GROUP BY task
ORDER BY task
