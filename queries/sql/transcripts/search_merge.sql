-- A text search's answer from its walk's partial aggregates (_search_partials: search_hits.sql's rows, one per
-- rollout and step), as search.sql answers: hits summed, the first hit's turn, role and snippet those with the
-- least key, the last hit the latest, newest first, at most $limit. last_ns and lo_ns (search_chosen.sql) are
-- for the walk, which drops them: they bound the row groups left to read for these rollouts.
WITH per_rollout AS (
    SELECT
        rollout_id,
        sum(hits)::BIGINT AS hits,
        arg_min(turn_index, turn_key) AS turn_index,
        arg_min(role, role_key) AS role,
        arg_min(snippet, snippet_key) AS snippet,
        max(last_ns) AS last_ns
    FROM _search_partials
    GROUP BY rollout_id
)
SELECT
    p.rollout_id, c.environment, c.task_id, c.step, c.rollout_status, c.reward,
    coalesce(c.lost_at, 'usable') AS stage, c.lost_reason, p.hits, p.turn_index, p.role, p.snippet,
    p.last_ns, c.lo_ns
FROM per_rollout AS p
JOIN _search_chosen AS c USING (rollout_id)
ORDER BY p.last_ns DESC, p.rollout_id
LIMIT $limit
