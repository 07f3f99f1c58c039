-- Throughput and waiting (the trainer's idle fraction is trainer.sql): decoded tokens per second of rollout
-- wall time, the rollout-length tail (decoded tokens and seconds per rollout), the share of rollout
-- time spent in tool / sandbox calls, and the spans exporters dropped or failed to write. A rate needs time
-- to be a rate: over turns that span less than one second (rate_window_s) it is NULL, not a division by ~0.
-- Per-rollout turn and tool sums come from _rollout_work (macros/05); each tail is one quantile_cont over a
-- list of fractions (one sort, not three).
-- The sums come from _rollout_sums (per step, environment: macros/07); the percentiles are exact: the run's (or
-- an environment's) kept ahead (_run_percentiles), over a step range taken from every kept rollout's value
-- (_rollout_tails, macros/07: one narrow row per value, in step order).
WITH ranged AS (SELECT $step_lo IS NOT NULL OR $step_hi IS NOT NULL AS ranged),
kept_tails AS MATERIALIZED (  -- a step range's values (without one, the run's percentiles are kept ahead)
    SELECT generated, duration_s
    FROM _rollout_tails($run_id)
    WHERE (SELECT ranged FROM ranged)
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
kept_work AS (  -- the known rollouts, by the step and environment _rollout_work keeps with each
    SELECT * FROM _rollout_sums($run_id)
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
        CASE WHEN window_s >= 1.0 THEN sum(generated_with_turns) / window_s END AS tokens_per_s,
        sum(tool_ns) / 1e9 AS tool_s
    FROM kept_work
),
tails AS (
    SELECT
        quantile_cont(generated, [0.5, 0.9, 0.99]) AS tokens,
        quantile_cont(duration_s, [0.5, 0.9, 0.99]) AS seconds,
        sum(duration_s) AS total_s
    FROM kept_tails
    HAVING (SELECT ranged FROM ranged)
    UNION ALL
    SELECT any_value(tokens), any_value(seconds), any_value(total_s)
    FROM _run_percentiles($run_id)
    WHERE all_environments = ($environment IS NULL) AND environment IS NOT DISTINCT FROM $environment
    HAVING NOT (SELECT ranged FROM ranged)
)
SELECT
    l.tokens_per_s AS rollout_tokens_per_s,
    l.window_s AS rate_window_s,
    d.tokens[1] AS length_p50,
    d.tokens[2] AS length_p90,
    d.tokens[3] AS length_p99,
    d.seconds[1] AS duration_p50_s,
    d.seconds[2] AS duration_p90_s,
    d.seconds[3] AS duration_p99_s,
    l.tool_s / nullif(d.total_s, 0) AS tool_wait_share,
    coalesce(s.dropped, 0) AS dropped_spans,
    coalesce(s.failed, 0) AS failed_spans
FROM lengths AS l, tails AS d, stats AS s
