-- The trainer's goodput per step (docs/metrics.md, "Goodput"): over each step's window (its start to the next
-- step's start), seconds computing (its rl.train_step span less rl.train.wait_s), waiting for data
-- (rl.train.wait_s), waiting on weight sync (rl.weight_sync time between its end and the next step, overlapping
-- syncs counted once) and other (gaps no span covers); computing_share = computing_s / window_s.
SELECT
    step, window_s, computing_s, data_wait_s, sync_wait_s, other_s,
    computing_s / nullif(window_s, 0) AS computing_share
FROM _trainer_goodput($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
ORDER BY step
