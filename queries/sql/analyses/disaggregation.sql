-- The figures behind the prefill-decode disaggregation verdict: the run's new-prefill : decode ratio, how it
-- varies across consuming steps, turn latency, turns per rollout, model size, and prefill / decode time.
-- Token and time sums and the model size come from the turn sums per step and environment (_prefill_sums,
-- macros/07), turns per rollout from the per-rollout work summed per step (_rollout_sums, macros/07); the
-- median turn latency is exact: the run's (or an environment's) kept ahead (_run_percentiles,
-- macros/08_health.sql), over a step range taken from every kept turn's seconds (_turn_latency, macros/07).
WITH sums AS MATERIALIZED (
    SELECT step, new_prefill_tokens, decode_tokens, prefill_ns, decode_ns, model_parameters
    FROM _prefill_sums($run_id)
    WHERE NOT per_turn_index
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
-- Each part below is one row, joined once at the end: as nine scalar subqueries the plan's join ordering took
-- 30-40 ms a call whatever the run's size, more than the query itself on most runs.
totals AS (
    SELECT
        sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) AS prefill_decode_ratio,
        max(model_parameters) AS model_parameters,
        sum(prefill_ns) / 1e9 AS prefill_time_s,
        sum(decode_ns) / 1e9 AS decode_time_s
    FROM sums
),
spread AS (
    SELECT count(ratio) AS steps, min(ratio) AS min_step_ratio, stddev_pop(ratio) / nullif(avg(ratio), 0) AS step_ratio_cv
    FROM (
        SELECT sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) AS ratio
        FROM sums
        WHERE step IS NOT NULL
        GROUP BY step
    )
),
ranged AS (SELECT $step_lo IS NOT NULL OR $step_hi IS NOT NULL AS ranged),
latency AS (  -- a step range's turns (without one, the run's median is kept ahead: _run_percentiles)
    SELECT median(duration_s) AS turn_latency_p50_s
    FROM _turn_latency($run_id)
    WHERE (SELECT ranged FROM ranged)
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
run_latency AS (
    SELECT any_value(turn_latency_p50_s) AS turn_latency_p50_s
    FROM _run_percentiles($run_id)
    WHERE all_environments = ($environment IS NULL) AND environment IS NOT DISTINCT FROM $environment
),
per_rollout AS (
    SELECT sum(turns) / nullif(sum(rollouts_with_turns), 0) AS turns_per_rollout
    FROM _rollout_sums($run_id)
    WHERE known AND rollouts_with_turns > 0
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
)
SELECT
    t.prefill_decode_ratio,
    s.steps,
    s.min_step_ratio,
    s.step_ratio_cv,
    CASE WHEN (SELECT ranged FROM ranged) THEN l.turn_latency_p50_s ELSE r.turn_latency_p50_s END
        AS turn_latency_p50_s,
    p.turns_per_rollout,
    t.model_parameters,
    t.prefill_time_s,
    t.decode_time_s
FROM totals AS t, spread AS s, latency AS l, run_latency AS r, per_rollout AS p
