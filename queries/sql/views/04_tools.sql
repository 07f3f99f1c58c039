-- Tool calls and sandbox executions (GenAI's "execute_tool {gen_ai.tool.name}" spans).
CREATE OR REPLACE VIEW tools AS
SELECT
    run_id, rollout_id, tool_name, tool_call_id, sandbox_id, tool_exit_code, observation_tokens,
    start_time, end_time, duration_s, start_ns, end_ns, status_code, error_type,
    service_name, instance_id, role, devices, trace_id, span_id, parent_span_id, attributes
FROM spans
WHERE name LIKE 'execute_tool%' OR operation_name = 'execute_tool';
