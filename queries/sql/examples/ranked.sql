-- Examples of a selection, picked (docs/transcripts.md, "Examples"): an examples/*.sql file's rollouts
-- (analysis: rollout_id and the figure it ranks by, value) in the consuming steps $step_lo .. $step_hi and
-- $environment, with their funnel stage (rollout_stages), at most $limit of them, from as many groups as there
-- are (a group's attempts share a task and a story: one each first), the largest value first (the smallest
-- with $ascending), else the newest. total counts the selection's rollouts and groups its groups (a rollout of
-- no group is a group of its own).
SELECT rollout_id, group_id, step, environment, reward, lost_at, lost_reason, value, total, groups
FROM (
    SELECT
        s.rollout_id, s.group_id, s.step, s.environment, s.reward, s.lost_at,
        _loss_reason(s.lost_reason, s.group_id) AS lost_reason, a.value,
        row_number() OVER (
            PARTITION BY coalesce(s.group_id, s.rollout_id)
            ORDER BY CASE WHEN $ascending THEN a.value END, a.value DESC NULLS LAST, s.rollout_id
        ) AS in_group,
        count(*) OVER () AS total,
        count(DISTINCT coalesce(s.group_id, s.rollout_id)) OVER () AS groups
    FROM analysis AS a
    JOIN rollout_stages($run_id) AS s USING (rollout_id)
    WHERE ($step_lo IS NULL OR s.step >= $step_lo)
      AND ($step_hi IS NULL OR s.step <= $step_hi)
      AND ($environment IS NULL OR s.environment = $environment)
) AS ranked
ORDER BY in_group, CASE WHEN $ascending THEN value END, value DESC NULLS LAST, step DESC NULLS FIRST, rollout_id
LIMIT $limit
