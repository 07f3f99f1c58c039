-- A detector's verdict (docs/report.md, "check rules"; docs/metrics.md, "Detectors"), over its rows (analysis:
-- detector_<rule>.sql, one row per judged train step, and environment or component where it judges them apart):
-- the steps it judged and fired at (a step fires when any of its rows does), the first and the latest it fired
-- at, whether it fires at the latest judged step (firing: what the check and an alert report), that step's row
-- (the fired one, else the one nearest to firing by severity) and the first fired row.
SELECT
    s.steps_judged, s.steps_fired, s.latest_step,
    coalesce(n.fired, false) AS firing,
    s.first_step, s.last_step,
    n.environment, n.part, n.value, n.level, n.reference,
    f.environment AS first_environment, f.part AS first_part, f.value AS first_value
FROM (
    SELECT
        count(*) AS steps_judged,
        count(*) FILTER (fired) AS steps_fired,
        max(step) AS latest_step,
        min(step) FILTER (fired) AS first_step,
        max(step) FILTER (fired) AS last_step
    FROM (SELECT step, bool_or(fired) AS fired FROM analysis GROUP BY step)
) AS s
LEFT JOIN (
    SELECT * FROM analysis
    WHERE step = (SELECT max(step) FROM analysis)
    ORDER BY fired DESC, severity DESC NULLS LAST, environment, part
    LIMIT 1
) AS n ON true
LEFT JOIN (
    SELECT * FROM analysis WHERE fired ORDER BY step, severity DESC NULLS LAST, environment, part LIMIT 1
) AS f ON true
