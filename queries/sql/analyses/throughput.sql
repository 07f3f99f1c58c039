-- Throughput and waiting: trainer idle fraction (Σ train_wait_s / Σ step seconds), decoded tokens per second
-- of rollout wall time, the rollout-length tail (decoded tokens and seconds per rollout), the share of rollout
-- time spent in tool / sandbox calls, and the spans exporters dropped or failed to write.
-- Speed (issue 4: ≤ 3× a hand-written aggregate): turns are summed per rollout before the kept rollouts are
-- looked up, that look-up is one semi join for turns and tool calls together, and each tail is one
-- quantile_cont over a list of fractions (one sort, not three).
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
work AS (  -- per rollout: decoded tokens and turn times, or one tool call's seconds
    SELECT rollout_id, sum(output_tokens) AS tokens, min(start_ns) AS first_ns, max(end_ns) AS last_ns,
        NULL::DOUBLE AS tool_s
    FROM turns
    WHERE run_id = $run_id
      AND $step_lo IS NULL AND $step_hi IS NULL AND $environment IS NULL
    GROUP BY rollout_id
    UNION ALL  -- with a filter, most turns drop out: keep them before summing
    SELECT t.rollout_id, sum(t.output_tokens), min(t.start_ns), max(t.end_ns), NULL
    FROM turns AS t
    SEMI JOIN kept_rollouts AS k USING (rollout_id)
    WHERE t.run_id = $run_id
      AND ($step_lo IS NOT NULL OR $step_hi IS NOT NULL OR $environment IS NOT NULL)
    GROUP BY t.rollout_id
    UNION ALL
    SELECT rollout_id, NULL, NULL, NULL, duration_s
    FROM tools
    WHERE run_id = $run_id
),
kept_work AS (
    SELECT * FROM work SEMI JOIN kept_rollouts USING (rollout_id)
),
trainer AS (
    SELECT sum(train_wait_s) / nullif(sum(duration_s), 0) AS idle_fraction, count(*) AS train_steps
    FROM train_steps
    WHERE run_id = $run_id
      AND ($step_lo IS NULL OR train_step >= $step_lo)
      AND ($step_hi IS NULL OR train_step <= $step_hi)
),
stats AS (
    SELECT sum(spans_dropped)::BIGINT AS dropped, sum(spans_failed)::BIGINT AS failed
    FROM collector_stats
    WHERE run_id = $run_id
),
lengths AS (  -- over kept rollouts with turns (a tool row has no tokens: quantile_cont skips it)
    SELECT
        sum(tokens) / nullif((max(last_ns) - min(first_ns)) / 1e9, 0) AS tokens_per_s,
        quantile_cont(tokens, [0.5, 0.9, 0.99]) AS tokens,
        sum(tool_s) AS tool_s
    FROM kept_work
),
durations AS (
    SELECT quantile_cont(duration_s, [0.5, 0.9, 0.99]) AS seconds, sum(duration_s) AS total_s
    FROM kept_rollouts
)
SELECT
    t.idle_fraction AS trainer_idle_fraction,
    t.train_steps,
    l.tokens_per_s AS rollout_tokens_per_s,
    l.tokens[1] AS length_p50,
    l.tokens[2] AS length_p90,
    l.tokens[3] AS length_p99,
    d.seconds[1] AS duration_p50_s,
    d.seconds[2] AS duration_p90_s,
    d.seconds[3] AS duration_p99_s,
    l.tool_s / nullif(d.total_s, 0) AS tool_wait_share,
    coalesce(s.dropped, 0) AS dropped_spans,
    coalesce(s.failed, 0) AS failed_spans
FROM trainer AS t, lengths AS l, durations AS d, stats AS s
