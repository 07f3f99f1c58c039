-- What the agent said and did: one row per message of the run's transcripts (the messages dataset, kept apart
-- from the spans; docs/store.md "Transcripts"). A rollout's conversation is its rows in (start_ns, span_id,
-- ordinal) order: each span's system prompt, the input it added, a tool's arguments, the reply, a tool's result.
-- content_chars is the text's length before the capture cap; truncated says the cap cut it.
CREATE OR REPLACE VIEW messages AS
SELECT
    run_id, rollout_id, turn_index, role, content, reasoning, tool_calls::JSON AS tool_calls, tool_name,
    tool_call_id, finish_reason, tokens, truncated, content_chars, source, message_index, ordinal, span_name,
    lower(hex(trace_id)) AS trace_id, span_id, start_ns, make_timestamp_ns(start_ns) AS start_time
FROM raw_messages;
