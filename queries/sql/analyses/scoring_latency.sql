-- Scoring latency over the run, or per consuming train step ($by = 'step'), and kind (docs/metrics.md, "Health"): verifier calls (rl.reward
-- spans) and judge calls (rl.judge spans), their count, latency p50 and p99 in seconds (linear interpolation)
-- and timeouts (rl.judge.status = 'timeout'). Calls of rollouts no step has consumed yet have step NULL
-- (last), so a scoring stall shows before the trainer takes its rollouts.
-- Over the whole run (no $by, no step range), p50 and p99 are the ones kept ahead (_run_percentiles in
-- macros/08_health.sql: the same quantile_cont over every call, brought up to date by each catch-up), so only the
-- counts and the maximum are read from the calls, without sorting them (at 30M spans, 2.1M calls, one thread:
-- 0.13 s of CPU → 0.06 s).
WITH whole AS (
    SELECT $by IS DISTINCT FROM 'step' AND $step_lo IS NULL AND $step_hi IS NULL AS run
),
calls AS (
    SELECT
        CASE WHEN $by = 'step' THEN step END AS step,
        kind,
        count(*) AS calls,
        quantile_cont(duration_s, [0.5, 0.99]) AS latency,  -- both from one sort of the calls
        max(duration_s) AS max_s,
        count(*) FILTER (timed_out) AS timeouts
    FROM _scoring($run_id)
    WHERE NOT (SELECT run FROM whole)
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY ALL
    UNION ALL
    SELECT NULL AS step, c.kind, c.calls, p.latency, c.max_s, c.timeouts
    FROM (
        SELECT kind, count(*) AS calls, max(duration_s) AS max_s, count(*) FILTER (timed_out) AS timeouts
        FROM _scoring($run_id)
        WHERE (SELECT run FROM whole)
          AND ($environment IS NULL OR environment = $environment)
        GROUP BY kind
    ) AS c
    LEFT JOIN (
        SELECT kind, latency
        FROM _run_percentiles($run_id)
        CROSS JOIN LATERAL (VALUES ('verifier', verifier_s), ('judge', judge_s)) AS k(kind, latency)
        WHERE all_environments = ($environment IS NULL) AND environment IS NOT DISTINCT FROM $environment
    ) AS p USING (kind)
)
SELECT step, kind, calls, latency[1] AS p50_s, latency[2] AS p99_s, max_s, timeouts
FROM calls
ORDER BY step NULLS LAST, kind
