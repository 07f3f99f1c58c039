-- One message whole (docs/transcripts.md): the content, reasoning and tool calls of the message at $ordinal of
-- span $span_id in rollout $rollout_id, for a reader who expands a text the conversation showed cut
-- (conversation.sql, $max_chars). Read in the rollout's time window ($lo .. $hi, window.sql).
SELECT content, reasoning, tool_calls::VARCHAR AS tool_calls, content_chars, truncated
FROM messages
WHERE run_id = $run_id AND rollout_id = $rollout_id AND span_id = $span_id AND ordinal = $ordinal
  AND start_ns BETWEEN $lo AND $hi
LIMIT 1
