-- The figures behind the prefill-decode disaggregation verdict: the run's new-prefill : decode ratio, how it
-- varies across consuming steps, turn latency, turns per rollout, model size, and prefill / decode time.
-- Per-step ratios and turns per rollout come from the per-rollout sums (_rollout_work, macros/05); only the
-- run-wide figures read the turns, joined to steps only when a step filter needs them.
WITH consumed AS (
    SELECT rollout_id, step, environment FROM rollout_steps($run_id)
),
kept_turns AS MATERIALIZED (
    SELECT t.new_input_tokens, t.output_tokens, t.duration_s, t.model_parameters, t.prefill_time_s, t.decode_time_s
    FROM turns AS t
    LEFT JOIN (
        SELECT rollout_id, step FROM consumed WHERE $step_lo IS NOT NULL OR $step_hi IS NOT NULL
    ) AS c USING (rollout_id)
    WHERE t.run_id = $run_id
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR t.environment = $environment)
),
kept_rollouts AS (
    SELECT c.step, w.turns, w.new_prefill, w.generated
    FROM _rollout_work($run_id) AS w
    JOIN consumed AS c USING (rollout_id)
    WHERE w.turns > 0
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR c.environment = $environment)
),
per_step AS (
    SELECT step, sum(new_prefill) / nullif(sum(generated), 0) AS ratio
    FROM kept_rollouts
    WHERE step IS NOT NULL
    GROUP BY step
),
run_wide AS (
    SELECT
        sum(new_input_tokens) / nullif(sum(output_tokens), 0) AS prefill_decode_ratio,
        median(duration_s) AS turn_latency_p50_s,
        max(model_parameters) AS model_parameters,
        sum(prefill_time_s) AS prefill_time_s,
        sum(decode_time_s) AS decode_time_s
    FROM kept_turns
)
SELECT
    w.prefill_decode_ratio,
    (SELECT count(ratio) FROM per_step) AS steps,
    (SELECT min(ratio) FROM per_step) AS min_step_ratio,
    (SELECT stddev_pop(ratio) / nullif(avg(ratio), 0) FROM per_step) AS step_ratio_cv,
    w.turn_latency_p50_s,
    (SELECT sum(turns) / nullif(count(*), 0) FROM kept_rollouts) AS turns_per_rollout,
    w.model_parameters,
    w.prefill_time_s,
    w.decode_time_s
FROM run_wide AS w
