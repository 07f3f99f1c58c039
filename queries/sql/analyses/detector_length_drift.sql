-- Response-length drift (docs/metrics.md, "Detectors"): per environment, over its consuming train steps, the mean
-- decoded tokens per rollout of the latest $window steps (level) against the $window steps before (reference);
-- value = level / reference − 1, fired when it moved by at least $threshold either way: the policy's outputs
-- growing or shrinking fast (verbosity gamed, reasoning cut short), not the slow drift of a learning run.
-- Summed from the consumed rollouts with turns per step and environment kept ahead (_generation_sums, macros/07).
WITH series AS (
    SELECT step, environment, sum(output_tokens) AS tokens, sum(rollouts_with_tokens) AS rollouts
    FROM _generation_sums($run_id)
    WHERE step IS NOT NULL
    GROUP BY ALL
    HAVING sum(rollouts_with_tokens) > 0
),
windows AS (
    SELECT
        step, environment,
        sum(tokens) OVER w / sum(rollouts) OVER w AS m,
        row_number() OVER (PARTITION BY environment ORDER BY step) AS i
    FROM series
    WINDOW w AS (PARTITION BY environment ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
lagged AS (
    SELECT *, m AS level, lag(m, $window) OVER (PARTITION BY environment ORDER BY step) AS reference
    FROM windows
)
SELECT
    step, environment, 'mean decoded tokens' AS part,
    level / nullif(reference, 0) - 1 AS value, level, reference,
    abs(level / nullif(reference, 0) - 1) >= $threshold AS fired,
    abs(level / nullif(reference, 0) - 1) AS severity
FROM lagged
WHERE i >= 2 * $window
ORDER BY step, environment
