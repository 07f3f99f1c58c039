-- Per consuming train step and reward function (docs/metrics.md, "Generations and rewards per step"): the
-- rollouts the function scored and its mean score over them (an rl.reward span with no score is left out). For a
-- TRL run this is rewards/<reward_name>/mean of the step TRL logs as step + 1.
SELECT
    r.step,
    w.reward_name,
    count(w.reward) AS scored,
    avg(w.reward) AS mean_reward
FROM rollout_steps($run_id) AS r
JOIN rewards AS w ON w.run_id = $run_id AND w.rollout_id = r.rollout_id
WHERE r.step IS NOT NULL
  AND ($step_lo IS NULL OR r.step >= $step_lo)
  AND ($step_hi IS NULL OR r.step <= $step_hi)
  AND ($environment IS NULL OR r.environment = $environment)
GROUP BY ALL
ORDER BY ALL
