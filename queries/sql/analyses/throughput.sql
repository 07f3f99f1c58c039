-- Throughput and waiting (the trainer's idle fraction is trainer.sql): decoded tokens per second of rollout
-- wall time, the rollout-length tail (decoded tokens and seconds per rollout), the share of rollout
-- time spent in tool / sandbox calls, and the spans exporters dropped or failed to write. A rate needs time
-- to be a rate: over turns that span less than one second (rate_window_s) it is NULL, not a division by ~0.
-- Per-rollout turn and tool sums come from _rollout_work (macros/05); each tail is one quantile_cont over a
-- list of fractions (one sort, not three).
WITH consumed AS (
    SELECT rollout_id, step
    FROM rollout_steps($run_id)
    WHERE $step_lo IS NOT NULL OR $step_hi IS NOT NULL
),
kept_rollouts AS (
    SELECT r.rollout_id, r.duration_s
    FROM rollouts AS r
    LEFT JOIN consumed AS c USING (rollout_id)
    WHERE r.run_id = $run_id
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR r.environment = $environment)
),
kept_work AS (  -- the same rollouts, by the step and environment _rollout_work keeps with each
    SELECT * FROM _rollout_work($run_id)
    WHERE known
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
stats AS (
    SELECT sum(spans_dropped)::BIGINT AS dropped, sum(spans_failed)::BIGINT AS failed
    FROM collector_stats
    WHERE run_id = $run_id
),
lengths AS (  -- over kept rollouts with turns
    SELECT
        (max(last_turn_ns) - min(first_turn_ns)) / 1e9 AS window_s,
        CASE WHEN window_s >= 1.0 THEN sum(generated) FILTER (turns > 0) / window_s END AS tokens_per_s,
        quantile_cont(generated, [0.5, 0.9, 0.99]) FILTER (turns > 0) AS tokens,
        sum(tool_ns) / 1e9 AS tool_s
    FROM kept_work
),
durations AS (
    SELECT quantile_cont(duration_s, [0.5, 0.9, 0.99]) AS seconds, sum(duration_s) AS total_s
    FROM kept_rollouts
)
SELECT
    l.tokens_per_s AS rollout_tokens_per_s,
    l.window_s AS rate_window_s,
    l.tokens[1] AS length_p50,
    l.tokens[2] AS length_p90,
    l.tokens[3] AS length_p99,
    d.seconds[1] AS duration_p50_s,
    d.seconds[2] AS duration_p90_s,
    d.seconds[3] AS duration_p99_s,
    l.tool_s / nullif(d.total_s, 0) AS tool_wait_share,
    coalesce(s.dropped, 0) AS dropped_spans,
    coalesce(s.failed, 0) AS failed_spans
FROM lengths AS l, durations AS d, stats AS s
