-- One step of a text search's walk (queries/text_search.py): search.sql's per-rollout aggregates over the
-- messages of a few row groups (_search_rows: what text_index.read read) of the chosen rollouts
-- (_search_chosen: search_chosen.sql; with $rollouts, of those alone). Partial: a rollout's messages may lie in
-- other row groups, so it keeps what merges exactly (search_merge.sql): the hits counted, the last hit's start,
-- and the first hit's turn, role and snippet each beside its key (start_ns, span_id, ordinal), the least among
-- the rows where it is not NULL (arg_min skips NULLs: search.sql's first turn is the first hit's that has one).
WITH said AS (
    SELECT
        rollout_id, turn_index, role, start_ns, span_id, ordinal,
        concat_ws(chr(10), content, reasoning, tool_calls::JSON::VARCHAR) AS text
    FROM _search_rows
    WHERE rollout_id IN (SELECT rollout_id FROM _search_chosen)
      AND ($rollouts IS NULL OR rollout_id IN (SELECT unnest($rollouts::VARCHAR[])))
),
hits AS (
    SELECT
        rollout_id, turn_index, role, start_ns, (start_ns, span_id, ordinal) AS key,
        _search_snippet(text, _search_hit_at(text, $pattern, $regex)) AS snippet
    FROM said
    WHERE _search_match(text, $pattern, $regex, $prefilter)
)
SELECT
    rollout_id,
    count(*) AS hits,
    max(start_ns) AS last_ns,
    arg_min(turn_index, key) AS turn_index,
    min(key) FILTER (WHERE turn_index IS NOT NULL) AS turn_key,
    arg_min(role, key) AS role,
    min(key) FILTER (WHERE role IS NOT NULL) AS role_key,
    arg_min(snippet, key) AS snippet,
    min(key) FILTER (WHERE snippet IS NOT NULL) AS snippet_key
FROM hits
GROUP BY rollout_id
