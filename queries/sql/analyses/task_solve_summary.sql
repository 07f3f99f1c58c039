-- Tasks by curriculum status (docs/metrics.md, "Learning"): of the tasks task_solve_rates.sql lists, how many were
-- attempted, always solved (every scored attempt succeeded: too easy, no signal), never solved (none did: too
-- hard, no signal) and mixed; each task's status is _solve_status of its attempts and successes, as there.
-- Counted straight from each task's sums, not from task_solve_rates' rows: the counts need neither its per-step
-- rows nor its early / late rates (at 30M spans, 590k rows of _reward_counts into 274k task-steps, then 692
-- tasks: 50 ms of the report, against a third of that summed per task).
WITH tasks AS (
    SELECT
        sum(scored) AS attempts,
        coalesce(sum(scored) FILTER (reward >= $success_threshold), 0) AS successes
    FROM _reward_counts($run_id)
    WHERE task IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY task
)
SELECT
    count(*) AS tasks_attempted,
    count(*) FILTER (_solve_status(successes, attempts) = 'always solved') AS tasks_always_solved,
    count(*) FILTER (_solve_status(successes, attempts) = 'never solved') AS tasks_never_solved,
    count(*) FILTER (_solve_status(successes, attempts) = 'mixed') AS tasks_mixed
FROM tasks
