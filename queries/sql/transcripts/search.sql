-- Text search over one run's transcripts (docs/transcripts.md): the rollouts with a message whose content,
-- reasoning or tool calls contain $pattern (case-insensitive; a regular expression, RE2's syntax, with $regex),
-- one row per rollout, newest first, at most $limit: its hits, the first hit's turn, role and a snippet around
-- it, and the rollout's step, environment, status, reward and where the funnel lost it. The Rollouts page's
-- filters apply: rollout or task id containing $text, status, environment, consuming step range ($step_lo ..
-- $step_hi: consumed rollouts only), reward range, the stage lost at ('usable': not lost) and why
-- ($lost_reason, as funnel_losses.sql names it), and a finish reason one of the rollout's messages ended with
-- ('length': a generation cut at the token limit). A NULL $pattern matches every message (the filters alone).
-- The per-rollout filters are applied first (rollout_stages, one row per rollout), so only their rollouts'
-- messages are searched. With $indexed the messages searched are _search_candidates, the row groups the
-- trigram sidecars left (queries/text_index.py: every message that can match is among them), else the messages
-- view; $prefilter (RE2, case-sensitive: text_index.prefilter) passes every text whose lower() can contain
-- lower($pattern), so lower() runs on those alone.
WITH chosen AS MATERIALIZED (
    SELECT
        rollout_id, environment, task_id, step, rollout_status, reward, lost_at,
        _loss_reason(lost_reason, group_id) AS lost_reason
    FROM rollout_stages($run_id)
    WHERE ($environment IS NULL OR environment = $environment)
      AND ($status IS NULL OR rollout_status = $status)
      AND ($text IS NULL OR rollout_id ILIKE '%' || $text || '%' OR task_id ILIKE '%' || $text || '%')
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($reward_min IS NULL OR reward >= $reward_min)
      AND ($reward_max IS NULL OR reward <= $reward_max)
      AND ($lost_at IS NULL OR coalesce(lost_at, 'usable') = $lost_at)
      AND ($lost_reason IS NULL OR _loss_reason(lost_reason, group_id) = $lost_reason)
),
source AS (
    SELECT rollout_id, turn_index, role, start_ns, span_id, ordinal, content, reasoning, tool_calls
    FROM messages
    WHERE run_id = $run_id AND NOT $indexed
    UNION ALL
    SELECT rollout_id, turn_index, role, start_ns, span_id, ordinal, content, reasoning, tool_calls::JSON
    FROM _search_candidates
    WHERE $indexed
),
said AS (
    SELECT
        rollout_id, turn_index, role, start_ns, span_id, ordinal,
        concat_ws(chr(10), content, reasoning, tool_calls::VARCHAR) AS text
    FROM source
    WHERE rollout_id IN (SELECT rollout_id FROM chosen)
),
finished AS (  -- the rollouts with a message that ended with the finish reason asked for
    SELECT DISTINCT rollout_id FROM messages
    WHERE $finish_reason IS NOT NULL AND run_id = $run_id AND finish_reason = $finish_reason
),
hits AS (
    SELECT
        *,
        CASE
            WHEN $pattern IS NULL THEN 1
            WHEN $regex THEN nullif(strpos(text, regexp_extract(text, '(?i)' || $pattern)), 0)
            ELSE nullif(strpos(lower(text), lower($pattern)), 0)
        END AS hit_at
    FROM said
    WHERE ($finish_reason IS NULL OR rollout_id IN (SELECT rollout_id FROM finished))
      AND ($pattern IS NULL
           OR CASE WHEN $regex THEN regexp_matches(text, '(?i)' || $pattern)
                   ELSE CASE WHEN regexp_matches(text, $prefilter) THEN contains(lower(text), lower($pattern)) END
           END)
),
per_rollout AS (
    SELECT
        rollout_id,
        count(*) AS hits,
        arg_min(turn_index, (start_ns, span_id, ordinal)) AS turn_index,
        arg_min(role, (start_ns, span_id, ordinal)) AS role,
        arg_min(
            CASE WHEN hit_at > 60 THEN '…' ELSE '' END
                || replace(substr(text, greatest(1, hit_at - 60), 200), chr(10), ' ')
                || CASE WHEN length(text) > hit_at + 139 THEN '…' ELSE '' END,
            (start_ns, span_id, ordinal)
        ) AS snippet,
        max(start_ns) AS last_ns
    FROM hits
    GROUP BY rollout_id
)
SELECT
    p.rollout_id, c.environment, c.task_id, c.step, c.rollout_status, c.reward,
    coalesce(c.lost_at, 'usable') AS stage, c.lost_reason, p.hits, p.turn_index, p.role, p.snippet
FROM per_rollout AS p
JOIN chosen AS c USING (rollout_id)
ORDER BY p.last_ns DESC, p.rollout_id
LIMIT $limit
