-- Per train step: seconds, seconds waiting for data, the idle fraction, tokens, the version produced and the
-- loss the trainer recorded (rl.train.loss; NULL when it records none), and what it logged about the update
-- (docs/metrics.md, "Training signals"): entropy, KL to the reference, the update's own KL, clip fraction, grad
-- norm and learning rate, each NULL when it logs none.
SELECT
    train_step AS step,
    policy_version,
    duration_s,
    train_wait_s,
    train_wait_s / nullif(duration_s, 0) AS trainer_idle_fraction,
    train_samples,
    train_tokens,
    train_loss,
    train_entropy,
    train_kl,
    train_policy_kl,
    train_clip_fraction,
    train_grad_norm,
    train_learning_rate
FROM _steps($run_id)
WHERE ($step_lo IS NULL OR train_step >= $step_lo)
  AND ($step_hi IS NULL OR train_step <= $step_hi)
ORDER BY train_step
