-- Mismatch rising (docs/metrics.md, "Detectors"): the train-inference KL per token (rl.sample.mismatch_kl, each
-- consuming step's mean) over the latest $window steps that recorded it against the $window before, each window
-- by its median (level, reference); value = level / reference, fired when at least $threshold: the trainer and
-- the engine drift apart step after step (a precision, kernel or weight-sync bug growing). Medians make it a
-- trend's alarm: a spike over fewer than half the window's steps does not move them (the mismatch-kl check
-- catches a step over its absolute limit).
-- From the mismatch sums per step and environment kept ahead (_mismatch_sums, macros/09).
WITH series AS (
    SELECT step, sum(mismatch_kl_sum) / sum(mismatch_kl_n) AS x
    FROM _mismatch_sums($run_id)
    WHERE step IS NOT NULL AND mismatch_kl_n > 0
    GROUP BY step
),
windows AS (
    SELECT step, median(x) OVER w AS m, row_number() OVER (ORDER BY step) AS i
    FROM series
    WINDOW w AS (ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
lagged AS (
    SELECT step, i, m AS level, lag(m, $window) OVER (ORDER BY step) AS reference FROM windows
)
SELECT
    step, NULL::VARCHAR AS environment, 'mismatch_kl' AS part,
    level / nullif(reference, 0) AS value, level, reference,
    level >= $threshold * reference AND level > 0 AS fired,
    level / nullif(reference, 0) AS severity
FROM lagged
WHERE i >= 2 * $window
ORDER BY step
