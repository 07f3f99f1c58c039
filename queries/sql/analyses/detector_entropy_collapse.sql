-- Entropy collapse (docs/metrics.md, "Detectors"): at each train step that logged the policy's entropy
-- (rl.train.entropy), its mean over that step and the $window − 1 before it (level, once $window steps have it),
-- the highest such mean so far (reference) and value = level / reference; fired when value is at most $threshold:
-- the policy has lost most of the entropy it had, and with it its exploration.
WITH series AS (
    SELECT train_step AS step, train_entropy AS x FROM _steps($run_id) WHERE train_entropy IS NOT NULL
),
windows AS (
    SELECT step, avg(x) OVER w AS level, count(*) OVER w AS n
    FROM series
    WINDOW w AS (ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
judged AS (
    SELECT step, level, max(level) OVER (ORDER BY step ROWS UNBOUNDED PRECEDING) AS reference
    FROM windows
    WHERE n = $window
)
SELECT
    step, NULL::VARCHAR AS environment, 'entropy' AS part,
    level / nullif(reference, 0) AS value, level, reference,
    level <= $threshold * reference AS fired,
    -level / nullif(reference, 0) AS severity
FROM judged
ORDER BY step
