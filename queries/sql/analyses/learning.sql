-- Is it learning (docs/metrics.md, "Learning"): over the scored rollouts (a reward recorded), their count, the
-- mean reward and its 10th / 50th / 90th percentiles (linear interpolation, numpy's default), and the success
-- rate: the share whose reward is at least $success_threshold (docs/semconv.md, "Success"). For the run, or
-- per consuming step, environment or both ($by: step | environment | step_environment); the other key stays NULL.
SELECT
    CASE WHEN $by IN ('step', 'step_environment') THEN step END AS step,
    CASE WHEN $by IN ('environment', 'step_environment') THEN environment END AS environment,
    count(*) AS scored,
    avg(reward) AS reward_mean,
    quantile_cont(reward, 0.1) AS reward_p10,
    quantile_cont(reward, 0.5) AS reward_p50,
    quantile_cont(reward, 0.9) AS reward_p90,
    avg(CASE WHEN reward >= $success_threshold THEN 1.0 ELSE 0.0 END) AS success_rate
FROM rollout_stages($run_id)
WHERE scored AND reward IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
  AND ($by NOT IN ('step', 'step_environment') OR step IS NOT NULL)
GROUP BY ALL
ORDER BY ALL NULLS LAST
