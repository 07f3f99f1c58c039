-- The figures behind the prefill-decode disaggregation verdict: the run's new-prefill : decode ratio, how it
-- varies across consuming steps, turn latency, turns per rollout, model size, and prefill / decode time.
-- Token and time sums and the model size come from the turn sums per step and environment (_prefill_sums,
-- macros/07), turns per rollout from the per-rollout work summed per step (_rollout_sums, macros/07); the
-- median turn latency is exact: the run's (or an environment's) kept ahead (_run_percentiles, macros/07), over
-- a step range taken from every kept turn's seconds (_turn_latency, macros/07).
WITH sums AS MATERIALIZED (
    SELECT step, new_prefill_tokens, decode_tokens, prefill_ns, decode_ns, model_parameters
    FROM _prefill_sums($run_id)
    WHERE NOT per_turn_index
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
per_step AS (
    SELECT step, sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) AS ratio
    FROM sums
    WHERE step IS NOT NULL
    GROUP BY step
),
ranged AS (SELECT $step_lo IS NOT NULL OR $step_hi IS NOT NULL AS ranged),
kept_turns AS (  -- a step range's turns (without one, the run's median is kept ahead: _run_percentiles)
    SELECT duration_s
    FROM _turn_latency($run_id)
    WHERE (SELECT ranged FROM ranged)
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
kept_rollouts AS (
    SELECT rollouts_with_turns, turns
    FROM _rollout_sums($run_id)
    WHERE known AND rollouts_with_turns > 0
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
)
SELECT
    (SELECT sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) FROM sums) AS prefill_decode_ratio,
    (SELECT count(ratio) FROM per_step) AS steps,
    (SELECT min(ratio) FROM per_step) AS min_step_ratio,
    (SELECT stddev_pop(ratio) / nullif(avg(ratio), 0) FROM per_step) AS step_ratio_cv,
    CASE
        WHEN (SELECT ranged FROM ranged) THEN (SELECT median(duration_s) FROM kept_turns)
        ELSE (
            SELECT any_value(turn_latency_p50_s) FROM _run_percentiles($run_id)
            WHERE all_environments = ($environment IS NULL) AND environment IS NOT DISTINCT FROM $environment
        )
    END AS turn_latency_p50_s,
    (SELECT sum(turns) / nullif(sum(rollouts_with_turns), 0) FROM kept_rollouts) AS turns_per_rollout,
    (SELECT max(model_parameters) FROM sums) AS model_parameters,
    (SELECT sum(prefill_ns) / 1e9 FROM sums) AS prefill_time_s,
    (SELECT sum(decode_ns) / 1e9 FROM sums) AS decode_time_s
