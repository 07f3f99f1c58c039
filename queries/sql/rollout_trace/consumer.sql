-- One rollout's identity and outcome, with the train step that consumed it and the policy version that step
-- trained (step s trains version s and produces s + 1; docs/metrics.md). Its rl.sample spans are read in the
-- rollout's time window (window.sql), not over the run, and its row of the per-rollout table in the row groups
-- of its start (a lookup by id alone reads every part's ids: 0.08 s against 0.02 s at 30M spans).
WITH sample AS (
    SELECT min(train_step) AS train_step,  -- the first, as rollout_steps (and so the Rollouts search) counts
        arg_min(sample_decision, train_step) AS sample_decision,
        arg_min(sample_staleness, train_step) AS sample_staleness
    FROM samples
    WHERE run_id = $run_id AND rollout_id = $rollout_id
      AND (start_ns BETWEEN $lo AND $hi OR start_ns BETWEEN $sample_lo AND $sample_hi)  -- window.sql
)
SELECT
    r.rollout_id, r.environment, r.task_id, r.group_id, r.rollout_status, r.reward,
    r.policy_version, r.start_time, r.duration_s,
    s.train_step, s.sample_decision, s.sample_staleness,
    coalesce(st.policy_version - 1, s.train_step) AS trained_policy_version,
    st.policy_version AS produced_policy_version
FROM rollouts AS r
CROSS JOIN sample AS s
LEFT JOIN (
    SELECT train_step, max(policy_version) AS policy_version FROM train_steps WHERE run_id = $run_id GROUP BY ALL
) AS st ON st.train_step = s.train_step
WHERE r.run_id = $run_id AND r.rollout_id = $rollout_id
  AND r.start_ns BETWEEN $lo AND $hi  -- true of its row (window.sql); row groups of other times are skipped
LIMIT 1
