-- The usable-experience funnel (docs/metrics.md): rollouts per stage and each stage's rate, for the run or
-- per step / environment / task ($by). Only the column named by $by is filled; the others stay NULL.
-- scored_in_groups: scored rollouts whose group has at least two scored attempts, the only ones that can
-- show a nonzero signal (0 in a run that records no groups: the nonzero-signal rate then means nothing).
-- Counted from the rollouts per step, environment, task and outcome kept ahead (_funnel_sums, macros/07).
WITH counts AS (
    SELECT
        CASE WHEN $by = 'step' THEN step END AS step,
        CASE WHEN $by = 'environment' THEN environment END AS environment,
        CASE WHEN $by = 'task' THEN task END AS task,
        sum(rollouts)::BIGINT AS dispatched,
        coalesce(sum(rollouts) FILTER (completed), 0)::BIGINT AS completed,
        coalesce(sum(rollouts) FILTER (scored), 0)::BIGINT AS scored,
        coalesce(sum(rollouts) FILTER (nonzero_signal), 0)::BIGINT AS nonzero_signal,
        coalesce(sum(rollouts) FILTER (fresh), 0)::BIGINT AS fresh,
        coalesce(sum(rollouts) FILTER (usable), 0)::BIGINT AS usable,
        coalesce(sum(rollouts) FILTER (in_groups), 0)::BIGINT AS scored_in_groups
    FROM _funnel_sums($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY ALL
)
SELECT
    *,
    completed / nullif(dispatched, 0) AS completion_rate,
    scored / nullif(completed, 0) AS scoring_rate,
    nonzero_signal / nullif(scored, 0) AS nonzero_signal_rate,
    fresh / nullif(nonzero_signal, 0) AS freshness_rate,
    usable / nullif(dispatched, 0) AS usable_rate
FROM counts
ORDER BY ALL NULLS LAST
