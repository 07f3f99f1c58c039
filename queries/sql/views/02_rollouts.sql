-- One row per rollout. reward is the rollout's own rl.reward.score, else the latest score of its rl.reward /
-- rl.judge spans; rollout_status defaults to infra_error for a span that ended in error, else ok.
-- _rollouts_src is the definition; a reader reads it from the store's derived table (queries/tables.py),
-- which is what `rollouts` reads there.
CREATE OR REPLACE VIEW _rollouts_src AS
WITH scores AS (
    SELECT run_id, rollout_id, arg_max(reward, end_ns) AS reward
    FROM raw_spans
    WHERE name IN ('rl.reward', 'rl.judge') AND reward IS NOT NULL AND rollout_id IS NOT NULL
    GROUP BY ALL
)
SELECT
    s.run_id, s.rollout_id, s.task_id, s.group_id, s.environment, s.policy_version, s.task_prompt_tokens,
    coalesce(s.rollout_status, CASE WHEN s.status_code = 'error' THEN 'infra_error' ELSE 'ok' END)
        AS rollout_status,
    coalesce(s.reward, sc.reward) AS reward,
    s.truncation_limit,  -- what the rollout's agent loop says stopped it (a turn or tool budget), if anything
    make_timestamp_ns(s.start_ns) AS start_time, make_timestamp_ns(s.end_ns) AS end_time,
    (s.end_ns - s.start_ns) / 1e9 AS duration_s, s.start_ns, s.end_ns,
    s.service_name, s.instance_id, lower(hex(s.trace_id)) AS trace_id, s.span_id, s.error_type,
    s.attributes::JSON AS attributes
FROM raw_spans AS s
LEFT JOIN scores AS sc ON sc.run_id = s.run_id AND sc.rollout_id = s.rollout_id AND s.reward IS NULL
WHERE s.name = 'rl.rollout';
CREATE OR REPLACE VIEW rollouts AS SELECT * FROM _rollouts_src;
