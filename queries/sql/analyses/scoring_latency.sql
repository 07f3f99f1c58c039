-- Scoring latency over the run, or per consuming train step ($by = 'step'), and kind (docs/metrics.md, "Health"): verifier calls (rl.reward
-- spans) and judge calls (rl.judge spans), their count, latency p50 and p99 in seconds (linear interpolation)
-- and timeouts (rl.judge.status = 'timeout'). Calls of rollouts no step has consumed yet have step NULL
-- (last), so a scoring stall shows before the trainer takes its rollouts.
SELECT step, kind, calls, latency[1] AS p50_s, latency[2] AS p99_s, max_s, timeouts
FROM (
    SELECT
        CASE WHEN $by = 'step' THEN step END AS step,
        kind,
        count(*) AS calls,
        quantile_cont(duration_s, [0.5, 0.99]) AS latency,  -- both from one sort of the calls
        max(duration_s) AS max_s,
        count(*) FILTER (timed_out) AS timeouts
    FROM _scoring($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY ALL
)
ORDER BY step NULLS LAST, kind
