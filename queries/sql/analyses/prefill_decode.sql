-- Prefill : decode (docs/metrics.md): new prefill, cached prefill and decode tokens, their ratio, prefix-cache
-- reuse, re-prefill waste (history prefilled again) and prefill / decode seconds where recorded, for the run
-- or per environment, turn index or consuming step ($by).
WITH consumed AS (
    SELECT rollout_id, step
    FROM rollout_steps($run_id)
    WHERE $by = 'step' OR $step_lo IS NOT NULL OR $step_hi IS NOT NULL
),
kept AS (
    SELECT t.*, c.step
    FROM turns AS t
    LEFT JOIN consumed AS c USING (rollout_id)
    WHERE t.run_id = $run_id
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR t.environment = $environment)
)
SELECT
    CASE WHEN $by = 'environment' THEN environment END AS environment,
    CASE WHEN $by = 'turn_index' THEN turn_index END AS turn_index,
    CASE WHEN $by = 'step' THEN step END AS step,
    count(*) AS turns,
    coalesce(sum(new_input_tokens), 0)::BIGINT AS new_prefill_tokens,
    coalesce(sum(cached_input_tokens), 0)::BIGINT AS cached_prefill_tokens,
    coalesce(sum(output_tokens), 0)::BIGINT AS decode_tokens,
    sum(new_input_tokens) / nullif(sum(output_tokens), 0) AS prefill_decode_ratio,
    sum(cached_input_tokens) / nullif(sum(input_tokens), 0) AS cache_hit_rate,
    coalesce(sum(greatest(0, coalesce(context_tokens, 0) - coalesce(cached_input_tokens, 0))), 0)::BIGINT
        AS reprefill_waste_tokens,
    sum(prefill_time_s) AS prefill_time_s,
    sum(decode_time_s) AS decode_time_s
FROM kept
GROUP BY ALL
ORDER BY ALL NULLS LAST
