-- The attempts of one rollout's group (its siblings and itself): status, reward and advantage, with their
-- turns and decoded tokens. advantage = reward - the mean reward of the group's scored attempts (what GRPO
-- centres on); advantage_z divides that by the rewards' population standard deviation (NULL when the rewards
-- are all equal: no signal). this_rollout marks the one asked for; start_ns and end_ns bound the group's time
-- window (its conversations are read in it: queries/transcripts.py).
WITH target AS (
    SELECT group_id FROM rollouts
    WHERE run_id = $run_id AND rollout_id = $rollout_id AND group_id IS NOT NULL
      AND start_ns BETWEEN $lo AND $hi  -- its time window (window.sql): the row groups of its start, not the run's
),
members AS (
    SELECT r.rollout_id, r.rollout_status, r.reward, r.policy_version, r.duration_s, r.start_ns, r.end_ns
    FROM rollouts AS r
    WHERE r.run_id = $run_id AND r.group_id = (SELECT group_id FROM target)
),
stats AS (
    SELECT avg(reward) AS mean_reward, stddev_pop(reward) AS std_reward FROM members WHERE reward IS NOT NULL
),
work AS (  -- the rollouts' turns, as the per-rollout work (_rollout_work) keeps them
    SELECT rollout_id, turns, generated AS decoded_tokens
    FROM _rollout_work($run_id)
    WHERE rollout_id IN (SELECT rollout_id FROM members) AND turns > 0
      -- Their turns start while they run (a minute each side, $skew_ns, for clock skew, as window.sql): the
      -- per-rollout table's row groups keep time ranges, so this reads the group's few, not the run's.
      AND first_turn_ns BETWEEN (SELECT min(start_ns) FROM members) - $skew_ns
                            AND (SELECT max(end_ns) FROM members) + $skew_ns
)
SELECT
    m.rollout_id,
    m.rollout_id = $rollout_id AS this_rollout,
    m.rollout_status,
    m.reward,
    m.reward - s.mean_reward AS advantage,
    (m.reward - s.mean_reward) / nullif(s.std_reward, 0) AS advantage_z,
    m.policy_version,
    coalesce(w.turns, 0) AS turns,
    w.decoded_tokens,
    m.duration_s,
    m.start_ns, m.end_ns
FROM members AS m
CROSS JOIN stats AS s
LEFT JOIN work AS w USING (rollout_id)
ORDER BY m.start_ns, m.rollout_id
