-- Model-judge spans; parameters is the judge model's size (span attribute, else the judge process's model).
CREATE OR REPLACE VIEW judges AS
SELECT
    run_id, rollout_id, request_model, coalesce(judge_model_parameters, model_parameters) AS parameters,
    input_tokens, output_tokens, coalesce(judge_status, CASE WHEN status_code = 'error' THEN 'error' ELSE 'ok' END)
        AS judge_status,
    reward, start_time, end_time, duration_s, start_ns, end_ns, status_code, error_type,
    service_name, instance_id, role, devices, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.judge';
