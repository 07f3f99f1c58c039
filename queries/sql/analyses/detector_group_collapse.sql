-- Group collapse (docs/metrics.md, "Detectors"): the nonzero-signal rate (rollouts whose group's rewards differ,
-- over scored rollouts) of the latest $window consuming train steps (level) against the $window before
-- (reference); value = the share of it lost, 1 − level / reference; fired when that is at least $threshold: the
-- groups are collapsing onto one reward (the policy answering every attempt alike) and the update loses its
-- signal. Steps whose scored rollouts form no group of two are left out (no signal to lose).
-- From the rollouts per step and funnel outcome kept ahead (_funnel_sums, macros/07).
WITH series AS (
    SELECT
        step,
        coalesce(sum(rollouts) FILTER (nonzero_signal), 0) AS nonzero,
        sum(rollouts) FILTER (scored) AS scored
    FROM _funnel_sums($run_id)
    WHERE step IS NOT NULL
    GROUP BY step
    HAVING coalesce(sum(rollouts) FILTER (in_groups), 0) > 0
),
windows AS (
    SELECT step, sum(nonzero) OVER w / sum(scored) OVER w AS m, row_number() OVER (ORDER BY step) AS i
    FROM series
    WINDOW w AS (ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
lagged AS (
    SELECT step, i, m AS level, lag(m, $window) OVER (ORDER BY step) AS reference FROM windows
)
SELECT
    step, NULL::VARCHAR AS environment, 'nonzero-signal rate' AS part,
    1 - level / nullif(reference, 0) AS value, level, reference,
    1 - level / nullif(reference, 0) >= $threshold AS fired,
    1 - level / nullif(reference, 0) AS severity
FROM lagged
WHERE i >= 2 * $window
ORDER BY step
