-- Train-inference mismatch (docs/metrics.md, "Learning"): over the consumed samples whose rl.sample recorded
-- it, their count, the mean and largest rl.sample.mismatch_kl, the mean rl.sample.logprob_diff.mean, the
-- largest rl.sample.logprob_diff.max and the mean importance ratio. For the run or per consuming step ($by).
-- Summed from the samples per step and environment kept ahead (_mismatch_sums, macros/09_learning.sql).
SELECT
    CASE WHEN $by = 'step' THEN step END AS step,
    sum(samples)::BIGINT AS samples,
    sum(mismatch_kl_sum) / nullif(sum(mismatch_kl_n), 0) AS mismatch_kl_mean,
    max(mismatch_kl_max) AS mismatch_kl_max,
    sum(logprob_diff_mean_sum) / nullif(sum(logprob_diff_mean_n), 0) AS logprob_diff_mean,
    max(logprob_diff_max) AS logprob_diff_max,
    sum(importance_ratio_mean_sum) / nullif(sum(importance_ratio_mean_n), 0) AS importance_ratio_mean
FROM _mismatch_sums($run_id)
WHERE step IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
