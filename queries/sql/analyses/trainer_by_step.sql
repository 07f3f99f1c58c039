-- Per train step: seconds, seconds waiting for data, the idle fraction, tokens, the version produced and the
-- loss the trainer recorded (rl.train.loss; NULL when it records none).
SELECT
    train_step AS step,
    policy_version,
    duration_s,
    train_wait_s,
    train_wait_s / nullif(duration_s, 0) AS trainer_idle_fraction,
    train_samples,
    train_tokens,
    train_loss
FROM _steps($run_id)
WHERE ($step_lo IS NULL OR train_step >= $step_lo)
  AND ($step_hi IS NULL OR train_step <= $step_hi)
ORDER BY train_step
