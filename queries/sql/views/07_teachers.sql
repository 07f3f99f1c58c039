-- Teacher / reference-model scoring spans (e.g. on-policy distillation).
CREATE OR REPLACE VIEW teachers AS
SELECT
    run_id, rollout_id, request_model, coalesce(teacher_model_parameters, model_parameters) AS parameters,
    teacher_tokens, start_time, end_time, duration_s, start_ns, end_ns, status_code,
    service_name, instance_id, role, devices, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.teacher';
