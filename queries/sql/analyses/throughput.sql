-- Throughput and waiting: trainer idle fraction (Σ train_wait_s / Σ step seconds), decoded tokens per second
-- of rollout wall time, the rollout-length tail (decoded tokens and seconds per rollout), the share of rollout
-- time spent in tool / sandbox calls, and the spans exporters dropped or failed to write.
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
decoded AS (
    SELECT t.rollout_id, sum(t.output_tokens) AS tokens, min(t.start_ns) AS first_ns, max(t.end_ns) AS last_ns
    FROM turns AS t
    SEMI JOIN kept_rollouts AS k USING (rollout_id)
    WHERE t.run_id = $run_id
    GROUP BY t.rollout_id
),
tool_time AS (
    SELECT sum(x.duration_s) AS seconds
    FROM tools AS x
    SEMI JOIN kept_rollouts AS k USING (rollout_id)
    WHERE x.run_id = $run_id
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
)
SELECT
    (SELECT idle_fraction FROM trainer) AS trainer_idle_fraction,
    (SELECT train_steps FROM trainer) AS train_steps,
    (SELECT sum(tokens) / nullif((max(last_ns) - min(first_ns)) / 1e9, 0) FROM decoded) AS rollout_tokens_per_s,
    (SELECT quantile_cont(tokens, 0.5) FROM decoded) AS length_p50,
    (SELECT quantile_cont(tokens, 0.9) FROM decoded) AS length_p90,
    (SELECT quantile_cont(tokens, 0.99) FROM decoded) AS length_p99,
    (SELECT quantile_cont(duration_s, 0.5) FROM kept_rollouts) AS duration_p50_s,
    (SELECT quantile_cont(duration_s, 0.9) FROM kept_rollouts) AS duration_p90_s,
    (SELECT quantile_cont(duration_s, 0.99) FROM kept_rollouts) AS duration_p99_s,
    (SELECT seconds FROM tool_time) / nullif((SELECT sum(duration_s) FROM kept_rollouts), 0) AS tool_wait_share,
    coalesce((SELECT dropped FROM stats), 0) AS dropped_spans,
    coalesce((SELECT failed FROM stats), 0) AS failed_spans
