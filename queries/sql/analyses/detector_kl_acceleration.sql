-- KL acceleration (docs/metrics.md, "Detectors"): the KL of the policy from the reference (rl.train.kl; a run
-- logging none: the update's own KL, rl.train.policy_kl, named in part) over windows of $window train steps that
-- logged it: level = the mean of the latest window, reference = the mean of the window before. value = the
-- growth of the latest window over the one before, as a multiple of the growth of that one over the window
-- before it (NULL when that grew by nothing). Fired when the latest growth is at least $threshold times the one
-- before and at least $growth times the previous window's mean: a KL that climbs faster and faster, the onset of
-- reward hacking, not its steady drift from the reference.
WITH steps AS (
    SELECT train_step AS step, train_kl, train_policy_kl FROM _steps($run_id)
),
chosen AS (
    SELECT CASE WHEN count(train_kl) > 0 THEN 'kl' ELSE 'policy_kl' END AS part FROM steps
),
series AS (
    SELECT s.step, CASE WHEN c.part = 'kl' THEN s.train_kl ELSE s.train_policy_kl END AS x, c.part
    FROM steps AS s, chosen AS c
    WHERE (CASE WHEN c.part = 'kl' THEN s.train_kl ELSE s.train_policy_kl END) IS NOT NULL
),
windows AS (
    SELECT step, part, avg(x) OVER w AS m, row_number() OVER (ORDER BY step) AS i
    FROM series
    WINDOW w AS (ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
lagged AS (
    SELECT
        step, part, i, m AS level,
        lag(m, $window) OVER (ORDER BY step) AS reference,
        lag(m, 2 * $window) OVER (ORDER BY step) AS before
    FROM windows
)
SELECT
    step, NULL::VARCHAR AS environment, part,
    (level - reference) / CASE WHEN reference > before THEN reference - before END AS value,
    level, reference,
    level - reference > 0
        AND level - reference >= $threshold * greatest(reference - before, 0)
        AND level - reference >= $growth * reference AS fired,
    (level - reference) / greatest(reference - before, 1e-12) AS severity
FROM lagged
WHERE i >= 3 * $window
ORDER BY step
