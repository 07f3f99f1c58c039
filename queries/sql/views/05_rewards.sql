-- Verifier spans: a reward produced by a rule, unit tests or exact match.
CREATE OR REPLACE VIEW rewards AS
SELECT
    run_id, rollout_id, reward_name, reward, judge_status, start_time, end_time, duration_s, start_ns, end_ns,
    status_code, error_type, service_name, instance_id, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.reward';
