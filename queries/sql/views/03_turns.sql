-- One row per policy generation: rl.turn spans, vLLM's llm_request spans and GenAI chat/completion spans.
-- A turn without rl.rollout.id (e.g. from vLLM) belongs to the one rollout of its trace, when there is one.
-- An inference engine's request span that is a direct child of an rl.turn (the turn's traceparent was sent
-- with the request: rollscope.integrations.engines) is not a turn of its own: it fills that turn's empty
-- columns (prefill / decode time, time to first token, cached and other token counts, speculative decoding).
-- Joins use the raw binary trace ids, and only traces holding an unlinked generation are searched.
-- truncation_limit: the limit that cut the generation off (docs/metrics.md, "Truncation"): the one it recorded,
-- else, when its finish reasons hold "length", the context length if prompt and response reach it, else the
-- response limit.
-- _turns_src is the definition; a reader reads it from the store's derived table (queries/tables.py).
CREATE OR REPLACE VIEW _turns_src AS
WITH engine_candidates AS (  -- few rows: engine request spans with a parent (none in most runs)
    SELECT
        run_id, trace_id, span_id, parent_span_id, input_tokens, cached_input_tokens, output_tokens,
        prefill_time_s, decode_time_s, ttft_s, spec_draft_tokens, spec_accepted_tokens, spec_verify_steps,
        spec_k, response_id
    FROM raw_spans
    WHERE parent_span_id IS NOT NULL AND name NOT IN ('rl.turn', 'rl.judge', 'rl.teacher')
      AND (name = 'llm_request' OR operation_name IN ('chat', 'text_completion', 'generate_content')
           OR prefill_time_s IS NOT NULL OR decode_time_s IS NOT NULL OR ttft_s IS NOT NULL)
),
engine_spans AS (  -- ... whose parent is an rl.turn
    SELECT c.* FROM engine_candidates AS c
    SEMI JOIN raw_spans AS t
        ON t.run_id = c.run_id AND t.trace_id = c.trace_id AND t.span_id = c.parent_span_id
       AND t.name = 'rl.turn'
),
engine AS (
    SELECT
        run_id, trace_id, parent_span_id AS turn_span_id,
        max(input_tokens) AS input_tokens, max(cached_input_tokens) AS cached_input_tokens,
        max(output_tokens) AS output_tokens, max(prefill_time_s) AS prefill_time_s,
        max(decode_time_s) AS decode_time_s, max(ttft_s) AS ttft_s,
        max(spec_draft_tokens) AS spec_draft_tokens, max(spec_accepted_tokens) AS spec_accepted_tokens,
        max(spec_verify_steps) AS spec_verify_steps, max(spec_k) AS spec_k,
        max(response_id) AS response_id  -- one of a retried request's ids, the same on every derivation
    FROM engine_spans
    GROUP BY ALL
),
generations AS (  -- rl.turn spans, and other generations that are not an engine's request under a turn
    SELECT * FROM raw_spans WHERE name = 'rl.turn'
    UNION ALL
    SELECT g.* FROM (  -- two conditions each on one column, which the scan applies (an OR of the two it cannot)
        SELECT * FROM raw_spans WHERE name = 'llm_request'
        UNION ALL
        SELECT * FROM raw_spans
        WHERE operation_name IN ('chat', 'text_completion', 'generate_content')
          AND name NOT IN ('rl.turn', 'rl.judge', 'rl.teacher', 'llm_request')
    ) AS g
    ANTI JOIN engine_spans AS e ON e.run_id = g.run_id AND e.trace_id = g.trace_id AND e.span_id = g.span_id
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
    SELECT
        g.* REPLACE (
            coalesce(g.input_tokens, e.input_tokens) AS input_tokens,
            coalesce(g.cached_input_tokens, e.cached_input_tokens) AS cached_input_tokens,
            coalesce(g.output_tokens, e.output_tokens) AS output_tokens,
            coalesce(g.prefill_time_s, e.prefill_time_s) AS prefill_time_s,
            coalesce(g.decode_time_s, e.decode_time_s) AS decode_time_s,
            coalesce(g.ttft_s, e.ttft_s) AS ttft_s,
            coalesce(g.spec_draft_tokens, e.spec_draft_tokens) AS spec_draft_tokens,
            coalesce(g.spec_accepted_tokens, e.spec_accepted_tokens) AS spec_accepted_tokens,
            coalesce(g.spec_verify_steps, e.spec_verify_steps) AS spec_verify_steps,
            coalesce(g.spec_k, e.spec_k) AS spec_k,
            coalesce(g.response_id, e.response_id) AS response_id
        ),
        coalesce(g.rollout_id, t.trace_rollout_id) AS linked_rollout_id
    FROM generations AS g
    LEFT JOIN trace_rollouts AS t ON t.run_id = g.run_id AND t.trace_id = g.trace_id
    LEFT JOIN engine AS e ON e.run_id = g.run_id AND e.trace_id = g.trace_id AND e.turn_span_id = g.span_id
)
SELECT
    l.run_id, l.linked_rollout_id AS rollout_id, r.environment, r.task_id, r.group_id,
    l.turn_index, coalesce(l.policy_version, r.policy_version) AS policy_version,
    l.input_tokens, l.cached_input_tokens,
    l.input_tokens - coalesce(l.cached_input_tokens, 0) AS new_input_tokens,
    l.output_tokens, l.context_tokens,
    l.prefix_tokens, l.continuity_break, l.compaction_tokens_before, l.compaction_tokens_after, l.sample_id,
    r.task_prompt_tokens,
    coalesce(
        l.truncation_limit,
        CASE WHEN coalesce(json_contains(l.attributes::JSON -> '$."gen_ai.response.finish_reasons"', '"length"'), false)
            THEN CASE WHEN l.input_tokens + l.output_tokens >= l.context_length THEN 'context' ELSE 'response' END
        END
    ) AS truncation_limit,
    l.max_tokens, l.context_length,
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
