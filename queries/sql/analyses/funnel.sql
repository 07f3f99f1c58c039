-- The usable-experience funnel (docs/metrics.md): rollouts per stage and each stage's rate, for the run or
-- per step / environment / task ($by). Only the column named by $by is filled; the others stay NULL.
-- scored_in_groups: scored rollouts whose group has at least two scored attempts, the only ones that can
-- show a nonzero signal (0 in a run that records no groups: the nonzero-signal rate then means nothing).
SELECT
    CASE WHEN $by = 'step' THEN step END AS step,
    CASE WHEN $by = 'environment' THEN environment END AS environment,
    CASE WHEN $by = 'task' THEN task_id END AS task,
    count(*) AS dispatched,
    count(*) FILTER (completed) AS completed,
    count(*) FILTER (scored) AS scored,
    count(*) FILTER (nonzero_signal) AS nonzero_signal,
    count(*) FILTER (fresh) AS fresh,
    count(*) FILTER (usable) AS usable,
    count(*) FILTER (scored AND group_scored >= 2) AS scored_in_groups,
    count(*) FILTER (completed) / nullif(count(*), 0) AS completion_rate,
    count(*) FILTER (scored) / nullif(count(*) FILTER (completed), 0) AS scoring_rate,
    count(*) FILTER (nonzero_signal) / nullif(count(*) FILTER (scored), 0) AS nonzero_signal_rate,
    count(*) FILTER (fresh) / nullif(count(*) FILTER (nonzero_signal), 0) AS freshness_rate,
    count(*) FILTER (usable) / nullif(count(*), 0) AS usable_rate
FROM rollout_stages($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
