-- One rollout's turns with where prefix continuity broke and where compaction happened (docs/metrics.md,
-- "Repeated prefill by remedy"): each turn's history (context_tokens), the exact prefix the job recorded, the
-- history served from cache and prefilled again, why (_continuity_reason, macros/11: set only where history was
-- prefilled again; an unattributed few, under $min_tokens, are an engine's last partial cache block, not a
-- break: an engine caches whole blocks of the prompt, 16 tokens in vLLM), a compaction it starts from (tokens before and after) and the training sample it belongs
-- to (0, then one more after each compaction). For the Rollouts page's waterfall and a conversation view.
-- Read from the derived turns in the rollout's time window (window.sql: its start's row groups, not the run's).
WITH own AS (
    SELECT * FROM turns
    WHERE run_id = $run_id AND rollout_id = $rollout_id AND start_ns BETWEEN $lo AND $hi
),
marked AS (
    SELECT
        turn_index, start_ns, input_tokens, cached_input_tokens, context_tokens, prefix_tokens,
        _history_reprefill(input_tokens, cached_input_tokens, context_tokens) AS reprefill_tokens,
        _continuity_reason(compaction_tokens_before IS NOT NULL, continuity_break, prefix_tokens, context_tokens)
            AS reason,
        compaction_tokens_before, compaction_tokens_after, sample_id,
        count(compaction_tokens_before) OVER (ORDER BY turn_index, start_ns ROWS UNBOUNDED PRECEDING)
            AS sample
    FROM own
)
SELECT
    turn_index,
    (start_ns - (SELECT min(start_ns) FROM own)) / 1e9 AS start_s,
    input_tokens, cached_input_tokens, context_tokens, prefix_tokens,
    least(coalesce(context_tokens, 0), coalesce(cached_input_tokens, 0)) AS history_cached_tokens,
    reprefill_tokens,
    CASE
        WHEN reprefill_tokens > 0 AND (reason <> 'unattributed' OR reprefill_tokens >= $min_tokens) THEN reason
    END AS continuity_break,
    compaction_tokens_before, compaction_tokens_after,
    compaction_tokens_before - compaction_tokens_after AS compaction_removed_tokens,
    sample, sample_id
FROM marked
ORDER BY turn_index, start_ns
