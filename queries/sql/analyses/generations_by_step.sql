-- Per consuming train step (docs/metrics.md, "Generations and rewards per step" and "Truncation"): rollouts
-- trained on, mean decoded tokens per rollout (the sum of its turns' output_tokens) and the clipped share
-- (rollouts whose last turn was cut off by a token limit: the response limit or the context length). For a TRL
-- run these are completions/mean_length and completions/clipped_ratio of the step TRL logs as step + 1.
-- The share of rollouts each limit cut off (the limit that applied, never the batch's longest sample: a rollout's
-- own turn or tool budget, else its last turn's token limit), the largest response limit the step's turns asked
-- for (gen_ai.request.max_tokens) and the longest single response.
-- Summed from the consumed rollouts with turns per step and environment kept ahead (_generation_sums, macros/07).
SELECT
    step,
    sum(rollouts)::BIGINT AS rollouts,
    sum(output_tokens) / nullif(sum(rollouts_with_tokens), 0) AS mean_output_tokens,
    sum(clipped) / sum(rollouts) AS clipped_share,
    sum(cut_response) / sum(rollouts) AS response_cut_share,
    sum(cut_context) / sum(rollouts) AS context_cut_share,
    sum(cut_turns) / sum(rollouts) AS turns_cut_share,
    sum(cut_tools) / sum(rollouts) AS tools_cut_share,
    max(max_tokens) AS max_tokens,
    max(longest_response) AS longest_response
FROM _generation_sums($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY step
ORDER BY step
