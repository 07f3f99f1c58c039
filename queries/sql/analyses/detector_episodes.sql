-- The stretches of consecutive judged train steps a detector fired at (docs/metrics.md, "Detectors"), over its rows
-- (analysis: detector_<rule>.sql): each stretch's first and last step, its steps, and the environment and part
-- that fired (NULL where several did, or the detector judges the run as a whole): what the Learning page marks on
-- its charts and links to example rollouts from.
SELECT
    s.first_step, s.last_step, s.steps,
    CASE WHEN count(DISTINCT a.environment) = 1 AND count(a.environment) = count(*) THEN any_value(a.environment)
    END AS environment,
    CASE WHEN count(DISTINCT a.part) = 1 THEN any_value(a.part) END AS part
FROM (
    SELECT min(step) AS first_step, max(step) AS last_step, count(*) AS steps
    FROM (
        SELECT
            step, fired,
            row_number() OVER (ORDER BY step) - row_number() OVER (PARTITION BY fired ORDER BY step) AS stretch
        FROM (SELECT step, bool_or(fired) AS fired FROM analysis GROUP BY step)
    )
    WHERE fired
    GROUP BY stretch
) AS s
JOIN analysis AS a ON a.fired AND a.step BETWEEN s.first_step AND s.last_step
GROUP BY s.first_step, s.last_step, s.steps
ORDER BY s.first_step
