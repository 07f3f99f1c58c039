-- One row per rollout. reward is the rollout's own rl.reward.score, else the latest score of its rl.reward /
-- rl.judge spans; rollout_status defaults to infra_error for a span that ended in error, else ok.
CREATE OR REPLACE VIEW rollouts AS
WITH scores AS (
    SELECT run_id, rollout_id, arg_max(reward, end_ns) AS reward
    FROM raw_spans
    WHERE name IN ('rl.reward', 'rl.judge') AND reward IS NOT NULL AND rollout_id IS NOT NULL
    GROUP BY ALL
)
SELECT
    s.run_id, s.rollout_id, s.task_id, s.group_id, s.environment, s.policy_version,
    coalesce(s.rollout_status, CASE WHEN s.status_code = 'error' THEN 'infra_error' ELSE 'ok' END)
        AS rollout_status,
    coalesce(s.reward, sc.reward) AS reward,
    s.start_time, s.end_time, s.duration_s, s.start_ns, s.end_ns,
    s.service_name, s.instance_id, s.trace_id, s.span_id, s.error_type, s.attributes
FROM spans AS s
LEFT JOIN scores AS sc USING (run_id, rollout_id)
WHERE s.name = 'rl.rollout';
