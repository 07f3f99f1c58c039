-- Train-inference mismatch step by step (docs/report.md, "mismatch"; the mismatch-kl check): over the
-- consuming steps of mismatch.sql by step (read as `analysis`, in the same statement) whose samples recorded
-- rl.sample.mismatch_kl, how many there are, the worst (largest mean KL per token) and its mean KL
-- (worst_step_mismatch_kl, the earliest step on a tie), and the steps whose mean KL is above $limit: how many
-- and the first and last (NULL without a $limit).
SELECT
    count(*) AS steps,
    arg_max(step, (mismatch_kl_mean, -step)) AS worst_step,
    max(mismatch_kl_mean) AS worst_step_mismatch_kl,
    count(*) FILTER (mismatch_kl_mean > $limit) AS steps_over,
    min(step) FILTER (mismatch_kl_mean > $limit) AS first_step_over,
    max(step) FILTER (mismatch_kl_mean > $limit) AS last_step_over
FROM analysis
WHERE step IS NOT NULL AND mismatch_kl_mean IS NOT NULL
