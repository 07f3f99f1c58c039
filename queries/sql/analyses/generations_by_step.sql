-- Per consuming train step (docs/metrics.md, "Generations and rewards per step"): rollouts trained on, mean
-- decoded tokens per rollout (the sum of its turns' output_tokens) and the clipped share (rollouts whose last
-- turn stopped at the length limit: gen_ai.response.finish_reasons holds "length"). For a TRL run these are
-- completions/mean_length and completions/clipped_ratio of the step TRL logs as step + 1.
-- Summed from the consumed rollouts with turns per step and environment kept ahead (_generation_sums, macros/07).
SELECT
    step,
    sum(rollouts)::BIGINT AS rollouts,
    sum(output_tokens) / nullif(sum(rollouts_with_tokens), 0) AS mean_output_tokens,
    sum(clipped) / sum(rollouts) AS clipped_share
FROM _generation_sums($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY step
ORDER BY step
