-- One row per policy generation: rl.turn spans, vLLM's llm_request spans and GenAI chat/completion spans.
-- A turn without rl.rollout.id (e.g. from vLLM) belongs to the one rollout of its trace, when there is one.
-- Joins use the raw binary trace ids, and only traces holding an unlinked generation are searched.
-- _turns_src is the definition; a materialized reader keeps it in a native table per run (reader.py).
CREATE OR REPLACE VIEW _turns_src AS
WITH generations AS (
    SELECT * FROM raw_spans
    WHERE name IN ('rl.turn', 'llm_request')
       OR (operation_name IN ('chat', 'text_completion', 'generate_content')
           AND name NOT IN ('rl.judge', 'rl.teacher'))
),
unlinked_traces AS (
    SELECT DISTINCT run_id, trace_id FROM generations WHERE rollout_id IS NULL
),
trace_rollouts AS (
    SELECT r.run_id, r.trace_id, any_value(r.rollout_id) AS trace_rollout_id
    FROM raw_spans AS r
    SEMI JOIN unlinked_traces AS u ON u.run_id = r.run_id AND u.trace_id = r.trace_id
    WHERE r.name = 'rl.rollout'
    GROUP BY ALL
    HAVING count(*) = 1
),
linked AS (
    SELECT g.*, coalesce(g.rollout_id, t.trace_rollout_id) AS linked_rollout_id
    FROM generations AS g
    LEFT JOIN trace_rollouts AS t ON t.run_id = g.run_id AND t.trace_id = g.trace_id
)
SELECT
    l.run_id, l.linked_rollout_id AS rollout_id, r.environment, r.task_id, r.group_id,
    l.turn_index, coalesce(l.policy_version, r.policy_version) AS policy_version,
    l.input_tokens, l.cached_input_tokens,
    l.input_tokens - coalesce(l.cached_input_tokens, 0) AS new_input_tokens,
    l.output_tokens, l.context_tokens,
    l.spec_draft_tokens, l.spec_accepted_tokens, l.spec_verify_steps, l.spec_k,
    l.drafter_version, l.drafter_policy_version, l.logprobs_source,
    l.prefill_time_s, l.decode_time_s, l.ttft_s, l.request_model, l.response_id,
    l.name, make_timestamp_ns(l.start_ns) AS start_time, make_timestamp_ns(l.end_ns) AS end_time,
    (l.end_ns - l.start_ns) / 1e9 AS duration_s, l.start_ns, l.end_ns, l.status_code,
    l.service_name, l.instance_id, l.role, l.devices, l.model_name, l.model_parameters,
    lower(hex(l.trace_id)) AS trace_id, l.span_id, l.parent_span_id, l.attributes::JSON AS attributes
FROM linked AS l
LEFT JOIN rollouts AS r ON r.run_id = l.run_id AND r.rollout_id = l.linked_rollout_id;
CREATE OR REPLACE VIEW turns AS SELECT * FROM _turns_src;
