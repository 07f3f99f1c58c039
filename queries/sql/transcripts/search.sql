-- Text search over one run's transcripts (docs/transcripts.md): the rollouts with a message whose content,
-- reasoning or tool calls contain $pattern (case-insensitive; a regular expression, RE2's syntax, with $regex),
-- one row per rollout, newest first (by its last matching message), at most $limit: its hits, the first hit's
-- turn, role and a snippet around it, and the rollout's step, environment, status, reward and where the funnel
-- lost it. The Rollouts page's filters apply: rollout or task id containing $text, status, environment,
-- consuming step range ($step_lo .. $step_hi: consumed rollouts only), reward range, the stage lost at
-- ('usable': not lost) and why ($lost_reason, as funnel_losses.sql names it), and a finish reason one of the
-- rollout's messages ended with ('length': a generation cut at the token limit). A NULL $pattern matches every
-- message (the filters alone). The per-rollout filters are applied first (_search_rollouts, over
-- rollout_stages: one row per rollout), so only their rollouts' messages are searched; $prefilter (RE2,
-- case-sensitive: text_index.prefilter) passes every text whose lower() can contain lower($pattern).
-- This reads every message of the run: the definition. A reader's search walks the newest row groups first and
-- stops early (queries/text_search.py, search_hits.sql, search_merge.sql), with the same answer.
WITH chosen AS MATERIALIZED (
    SELECT *
    FROM _search_rollouts($run_id, $environment, $status, $text, $step_lo, $step_hi, $reward_min, $reward_max,
                          $lost_at, $lost_reason, $finish_reason)
),
said AS (
    SELECT
        rollout_id, turn_index, role, start_ns, span_id, ordinal,
        concat_ws(chr(10), content, reasoning, tool_calls::VARCHAR) AS text
    FROM messages
    WHERE run_id = $run_id AND rollout_id IN (SELECT rollout_id FROM chosen)
),
hits AS (
    SELECT *, _search_hit_at(text, $pattern, $regex) AS hit_at
    FROM said
    WHERE _search_match(text, $pattern, $regex, $prefilter)
),
per_rollout AS (
    SELECT
        rollout_id,
        count(*) AS hits,
        arg_min(turn_index, (start_ns, span_id, ordinal)) AS turn_index,
        arg_min(role, (start_ns, span_id, ordinal)) AS role,
        arg_min(_search_snippet(text, hit_at), (start_ns, span_id, ordinal)) AS snippet,
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
