-- The figures behind the prefill-decode disaggregation verdict: the run's new-prefill : decode ratio, how it
-- varies across consuming steps, turn latency, turns per rollout, model size, and prefill / decode time.
WITH consumed AS (
    SELECT rollout_id, step FROM rollout_steps($run_id)
),
kept AS (
    SELECT
        t.rollout_id, t.new_input_tokens, t.output_tokens, t.duration_s, t.model_parameters,
        t.prefill_time_s, t.decode_time_s, c.step
    FROM turns AS t
    LEFT JOIN consumed AS c USING (rollout_id)
    WHERE t.run_id = $run_id
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR t.environment = $environment)
),
per_step AS (
    SELECT step, sum(new_input_tokens) / nullif(sum(output_tokens), 0) AS ratio
    FROM kept
    WHERE step IS NOT NULL
    GROUP BY step
)
SELECT
    (SELECT sum(new_input_tokens) / nullif(sum(output_tokens), 0) FROM kept) AS prefill_decode_ratio,
    (SELECT count(ratio) FROM per_step) AS steps,
    (SELECT min(ratio) FROM per_step) AS min_step_ratio,
    (SELECT stddev_pop(ratio) / nullif(avg(ratio), 0) FROM per_step) AS step_ratio_cv,
    (SELECT median(duration_s) FROM kept) AS turn_latency_p50_s,
    (SELECT count(*) / nullif(count(DISTINCT rollout_id), 0) FROM kept) AS turns_per_rollout,
    (SELECT max(model_parameters) FROM kept) AS model_parameters,
    (SELECT sum(prefill_time_s) FROM kept) AS prefill_time_s,
    (SELECT sum(decode_time_s) FROM kept) AS decode_time_s
