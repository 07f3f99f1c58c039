-- The trainer over the run or a step range: its train steps, the share of their time it waited for data
-- (idle fraction = Σ train_wait_s / Σ step seconds: rollouts, not the update, limit a trainer that waits), and
-- train_loss_last, the rl.train.loss of the latest step that recorded one (NULL when none did).
SELECT
    sum(train_wait_s) / nullif(sum(duration_s), 0) AS trainer_idle_fraction,
    count(*) AS train_steps,
    arg_max(train_loss, train_step) FILTER (WHERE train_loss IS NOT NULL) AS train_loss_last
FROM _steps($run_id)
WHERE ($step_lo IS NULL OR train_step >= $step_lo)
  AND ($step_hi IS NULL OR train_step <= $step_hi)
