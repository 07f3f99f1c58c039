-- Per consuming train step and reward function (docs/metrics.md, "Generations and rewards per step"): the
-- rollouts the function scored and its mean score over them (an rl.reward span with no score is left out, and so
-- are rollouts that ended infra_error or aborted). For a
-- TRL run this is rewards/<reward_name>/mean of the step TRL logs as step + 1.
-- Summed from the scores per step, environment and reward function kept ahead (_reward_sums, macros/07).
SELECT
    step,
    reward_name,
    sum(scored)::BIGINT AS scored,
    sum(reward_sum) / nullif(sum(scored), 0) AS mean_reward
FROM _reward_sums($run_id)
WHERE kind = 'verifier'
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY ALL
