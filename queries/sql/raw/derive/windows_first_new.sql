-- The first start among the new spans rollout_goodput reads (turns, rollouts, train steps, weight syncs): its
-- step windows from the one holding it on are swept again (refresh.refresh_windows). NULL: nothing it reads is
-- new.
SELECT min(start_ns) AS t0 FROM _new
WHERE name IN ('rl.turn', 'rl.rollout', 'rl.train_step', 'rl.weight_sync');
