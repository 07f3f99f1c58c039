-- Prefill : decode (docs/metrics.md): new prefill, cached prefill and decode tokens, their ratio, prefix-cache
-- reuse, re-prefill waste (history prefilled again) and prefill / decode seconds where recorded, for the run
-- or per environment, turn index or consuming step ($by). Summed from the turn sums per step and environment
-- (and turn index, for $by = 'turn_index') kept ahead (_prefill_sums, macros/07).
SELECT
    CASE WHEN $by = 'environment' THEN environment END AS environment,
    CASE WHEN $by = 'turn_index' THEN turn_index END AS turn_index,
    CASE WHEN $by = 'step' THEN step END AS step,
    sum(turns)::BIGINT AS turns,
    coalesce(sum(new_prefill_tokens), 0)::BIGINT AS new_prefill_tokens,
    coalesce(sum(cached_prefill_tokens), 0)::BIGINT AS cached_prefill_tokens,
    coalesce(sum(decode_tokens), 0)::BIGINT AS decode_tokens,
    sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) AS prefill_decode_ratio,
    sum(cached_prefill_tokens) / nullif(sum(input_tokens), 0) AS cache_hit_rate,
    coalesce(sum(reprefill_waste_tokens), 0)::BIGINT AS reprefill_waste_tokens,
    sum(prefill_ns) / 1e9 AS prefill_time_s,
    sum(decode_ns) / 1e9 AS decode_time_s
FROM _prefill_sums($run_id)
WHERE per_turn_index = coalesce($by = 'turn_index', false)
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
