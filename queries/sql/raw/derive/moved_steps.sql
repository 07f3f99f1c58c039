-- The steps outside the scope that scoped rollouts moved to (a late group member, a recorded decision for an
-- earlier step): the scope takes them and is derived again. The group members read beside the scope keep their
-- steps: not theirs.
SELECT DISTINCT step FROM _rollout_steps_mat
WHERE step IS NOT NULL
  AND step NOT IN (SELECT step FROM _scope_steps)
  AND rollout_id IN (SELECT rollout_id FROM _scope_rollouts);
