-- New policy weights reaching rollout workers.
CREATE OR REPLACE VIEW weight_syncs AS
SELECT
    run_id, policy_version, start_time, end_time, duration_s, start_ns, end_ns,
    service_name, instance_id, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.weight_sync';
