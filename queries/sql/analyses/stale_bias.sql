-- What dropping stale samples biases (docs/metrics.md, "Staleness and throughput"): rollouts that carried a
-- signal, kept (usable) against dropped for staleness (lost at the fresh stage as 'stale'): how many, their mean
-- decoded tokens, mean seconds from dispatch to end, mean reward and success rate (reward at least
-- $success_threshold). A dropped set longer, slower or harder than the kept one means dropping stale samples
-- trains the policy toward fast, short, easy problems.
-- Summed from those rollouts per step, environment and reward kept ahead (_stale_bias_sums, macros/09_learning.sql).
SELECT
    CASE WHEN kept THEN 'kept' ELSE 'dropped stale' END AS samples,
    sum(rollouts)::BIGINT AS rollouts,
    sum(generated_sum) / nullif(sum(generated_n), 0) AS decoded_tokens_mean,
    sum(duration_s_sum) / nullif(sum(duration_n), 0) AS duration_s_mean,
    sum(reward * rollouts) / nullif(sum(rollouts) FILTER (reward IS NOT NULL), 0) AS reward_mean,
    coalesce(sum(rollouts) FILTER (reward >= $success_threshold), 0) / sum(rollouts) AS success_rate
FROM _stale_bias_sums($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY samples DESC
