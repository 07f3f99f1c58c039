-- Train-inference mismatch (docs/metrics.md, "Learning"): over the consumed samples whose rl.sample recorded
-- it, their count, the mean and largest rl.sample.mismatch_kl, the mean rl.sample.logprob_diff.mean, the
-- largest rl.sample.logprob_diff.max and the mean importance ratio. For the run or per consuming step ($by).
SELECT
    CASE WHEN $by = 'step' THEN step END AS step,
    count(*) AS samples,
    avg(mismatch_kl) AS mismatch_kl_mean,
    max(mismatch_kl) AS mismatch_kl_max,
    avg(logprob_diff_mean) AS logprob_diff_mean,
    max(logprob_diff_max) AS logprob_diff_max,
    avg(importance_ratio_mean) AS importance_ratio_mean
FROM rollout_steps($run_id)
WHERE step IS NOT NULL
  AND coalesce(mismatch_kl, logprob_diff_mean, logprob_diff_max, importance_ratio_mean) IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
