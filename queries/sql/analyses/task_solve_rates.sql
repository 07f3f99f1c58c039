-- Per task (docs/metrics.md, "Learning"): scored attempts, successes (reward at least $success_threshold), the
-- solve rate, the first and last consuming step it was attempted at, the solve rate over its first and its last
-- half of attempts (did training move it?), and its curriculum status: 'always solved' (every scored attempt
-- succeeded: too easy, no signal), 'never solved' (none did: too hard, no signal) or 'mixed'.
WITH attempts AS (
    SELECT
        task_id AS task,
        step,
        CASE WHEN reward >= $success_threshold THEN 1 ELSE 0 END AS success,
        row_number() OVER (PARTITION BY task_id ORDER BY step NULLS LAST, rollout_id) AS n,
        count(*) OVER (PARTITION BY task_id) AS total
    FROM rollout_stages($run_id)
    WHERE scored AND reward IS NOT NULL AND task_id IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
)
SELECT
    task,
    count(*) AS attempts,
    sum(success)::BIGINT AS successes,
    avg(success) AS solve_rate,
    min(step) AS first_step,
    max(step) AS last_step,
    avg(success) FILTER (2 * n <= total) AS early_solve_rate,
    avg(success) FILTER (2 * n > total) AS late_solve_rate,
    CASE WHEN min(success) = 1 THEN 'always solved' WHEN max(success) = 0 THEN 'never solved' ELSE 'mixed' END
        AS status
FROM attempts
GROUP BY task
ORDER BY task
