-- Every block of consuming steps a run's rows fall in ('p': not consumed yet), with the rollouts it holds: the
-- rollouts' consuming steps and the train steps' own (a train step's work counts at its step; pieces._blocks).
SELECT _block_of(step, $block_steps) AS block, count(rollout_id) AS rollouts
FROM (
    SELECT step, rollout_id FROM _rollout_steps_mat
    UNION ALL
    SELECT DISTINCT train_step, NULL FROM _train_steps_mat WHERE train_step IS NOT NULL
)
GROUP BY block;
