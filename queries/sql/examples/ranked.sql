-- Examples of a selection, picked (docs/transcripts.md, "Examples"): an examples/*.sql file's rollouts
-- (analysis: rollout_id and the figure it ranks by, value) in the consuming steps $step_lo .. $step_hi and
-- $environment, with their funnel stage (rollout_stages), at most $limit of them, from as many groups as there
-- are (a group's attempts share a task and a story: one each first), the largest value first (the smallest
-- with $ascending), else the newest. total counts the selection's rollouts and groups its groups (a rollout of
-- no group is a group of its own).
-- How: a group's own order is rank_key (ranked values first, then the value, then the id). With at least $limit
-- groups the examples are the groups' first rollouts (one aggregate); with fewer, every rollout is numbered in
-- its group (a window, over few groups). Counting and numbering the whole selection with windows took seconds at
-- two million rollouts.
WITH chosen AS MATERIALIZED (
    SELECT
        s.rollout_id, s.group_id, s.step, s.environment, s.reward, s.lost_at,
        _loss_reason(s.lost_reason, s.group_id) AS lost_reason, a.value,
        coalesce(s.group_id, s.rollout_id) AS bucket,
        {
            'unranked': a.value IS NULL,
            'value': coalesce(CASE WHEN $ascending THEN a.value ELSE -a.value END, 0),
            'rollout_id': s.rollout_id
        } AS rank_key
    FROM analysis AS a
    JOIN rollout_stages($run_id) AS s USING (rollout_id)
    WHERE ($step_lo IS NULL OR s.step >= $step_lo)
      AND ($step_hi IS NULL OR s.step <= $step_hi)
      AND ($environment IS NULL OR s.environment = $environment)
),
counts AS (
    SELECT count(*) AS total, count(DISTINCT bucket) AS groups FROM chosen
),
firsts AS (  -- each group's first rollout, when there are groups enough for every example to be a first
    SELECT unnest(arg_min(chosen, rank_key)), 1 AS in_group
    FROM chosen
    WHERE (SELECT groups FROM counts) >= $limit
    GROUP BY bucket
),
numbered AS (  -- else every rollout numbered in its group
    SELECT *, row_number() OVER (PARTITION BY bucket ORDER BY rank_key) AS in_group
    FROM chosen
    WHERE (SELECT groups FROM counts) < $limit
),
ranked AS (
    SELECT * FROM firsts
    UNION ALL BY NAME
    SELECT * FROM numbered
)
SELECT rollout_id, group_id, step, environment, reward, lost_at, lost_reason, value, total, groups
FROM ranked, counts
ORDER BY in_group, CASE WHEN $ascending THEN value END, value DESC NULLS LAST, step DESC NULLS FIRST, rollout_id
LIMIT $limit
