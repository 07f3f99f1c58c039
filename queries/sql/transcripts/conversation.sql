-- Rollouts as conversations (docs/transcripts.md): one row per message of each rollout in $rollout_ids, in
-- reading order, beside the accounting of the span it came from. A turn's row carries its tokens, cached
-- tokens, prefill / decode time and speculative acceptance (the turns view: an engine's request under the
-- turn fills what the turn left empty); a tool call's, its exit code, observation tokens and time; a judge's or
-- verifier's, its reward and status. A span that recorded no content (capture off, sampled out) is one row of
-- its own with no message, so every turn shows; a message of a span that is none of these keeps its span's
-- name alone. Texts longer than $max_chars are cut for showing: their first $max_chars * 3/4 and last quarter
-- around a marker, as the capture cap cuts them (shown_cut says so; message.sql reads one whole), so a 1 MB
-- tool output never leaves DuckDB whole. start_s is seconds from the rollout's first span or message.
-- Everything is read in the rollouts' time window ($lo .. $hi, window.sql): the row groups of their times, not
-- the run's.
WITH accounted AS (
    SELECT
        rollout_id, span_id, start_ns, end_ns, 'turn' AS kind, name AS span_name, turn_index,
        input_tokens, cached_input_tokens, output_tokens, prefill_time_s, decode_time_s, ttft_s,
        spec_draft_tokens, spec_accepted_tokens, request_model, status_code,
        NULL::VARCHAR AS tool_name, NULL::BIGINT AS tool_exit_code, NULL::BIGINT AS observation_tokens,
        NULL::VARCHAR AS reward_name, NULL::DOUBLE AS reward, NULL::VARCHAR AS judge_status
    FROM turns
    WHERE run_id = $run_id AND rollout_id IN (SELECT unnest($rollout_ids::VARCHAR[]))
      AND start_ns BETWEEN $lo AND $hi
    UNION ALL
    SELECT
        rollout_id, span_id, start_ns, end_ns,
        CASE WHEN name = 'rl.judge' THEN 'judge' WHEN name = 'rl.reward' THEN 'reward' ELSE 'tool' END,
        name, turn_index, input_tokens, NULL, output_tokens, NULL, NULL, NULL, NULL, NULL, request_model,
        status_code, tool_name, tool_exit_code, observation_tokens, reward_name, reward, judge_status
    FROM spans
    WHERE run_id = $run_id AND rollout_id IN (SELECT unnest($rollout_ids::VARCHAR[]))
      AND start_ns BETWEEN $lo AND $hi
      AND (name IN ('rl.judge', 'rl.reward') OR name LIKE 'execute_tool%' OR operation_name = 'execute_tool')
),
said AS (
    SELECT * FROM messages
    WHERE run_id = $run_id AND rollout_id IN (SELECT unnest($rollout_ids::VARCHAR[]))
      AND start_ns BETWEEN $lo AND $hi
),
rows AS (
    SELECT
        coalesce(a.rollout_id, m.rollout_id) AS rollout_id,
        coalesce(a.span_id, m.span_id) AS span_id,
        coalesce(a.start_ns, m.start_ns) AS start_ns,
        a.end_ns,
        coalesce(a.kind, CASE WHEN m.span_name LIKE 'execute_tool%' THEN 'tool' ELSE 'other' END) AS kind,
        coalesce(a.span_name, m.span_name) AS span_name,
        coalesce(a.turn_index, m.turn_index) AS turn_index,
        a.* EXCLUDE (rollout_id, span_id, start_ns, end_ns, kind, span_name, turn_index),
        m.ordinal, m.source, m.role, m.content, m.reasoning, m.tool_calls::VARCHAR AS tool_calls,
        m.tool_call_id, m.finish_reason, m.tokens, m.truncated, m.content_chars,
        coalesce(a.tool_name, m.tool_name) AS message_tool_name
    FROM accounted AS a
    FULL JOIN said AS m ON m.rollout_id = a.rollout_id AND m.span_id = a.span_id
)
SELECT
    rollout_id, span_id, kind, span_name, turn_index,
    (start_ns - min(start_ns) OVER (PARTITION BY rollout_id)) / 1e9 AS start_s,
    (end_ns - start_ns) / 1e9 AS duration_s,
    input_tokens, cached_input_tokens, output_tokens, prefill_time_s, decode_time_s, ttft_s,
    spec_draft_tokens, spec_accepted_tokens, spec_accepted_tokens / nullif(spec_draft_tokens, 0) AS acceptance,
    request_model, status_code, message_tool_name AS tool_name, tool_exit_code, observation_tokens,
    reward_name, reward, judge_status,
    ordinal, source, role,
    _shown(content, $max_chars) AS content,
    _shown(reasoning, $max_chars) AS reasoning,
    _shown(tool_calls, $max_chars) AS tool_calls,
    tool_call_id, finish_reason, tokens, truncated, content_chars,
    greatest(length(content), length(reasoning), length(tool_calls)) > $max_chars AS shown_cut
FROM rows
ORDER BY rollout_id, start_ns, span_id, ordinal NULLS FIRST
