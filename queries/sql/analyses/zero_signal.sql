-- Why groups carry no signal (docs/metrics.md, "Learning"): the rollouts lost at the nonzero-signal stage and
-- their groups, split by the group's scored rewards: all_wrong (all equal, at most 0: too hard), all_right (all
-- equal, at least 1: too easy), other_equal (all equal in between, or the trainer's own zero-signal call on
-- rewards that vary) and group_too_small (fewer than two scored attempts). For the run or per consuming step,
-- environment or task ($by); the other keys stay NULL.
WITH lost AS (
    SELECT * FROM rollout_stages($run_id)
    WHERE lost_at = 'nonzero_signal'
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
groups AS (
    SELECT group_id, count(reward) AS n, min(reward) AS lo, max(reward) AS hi
    FROM rollout_stages($run_id)
    WHERE scored AND reward IS NOT NULL AND group_id IN (SELECT group_id FROM lost)
    GROUP BY group_id
),
kinds AS (
    SELECT
        l.step, l.environment, l.task_id, coalesce(l.group_id, l.rollout_id) AS group_key,
        CASE
            WHEN coalesce(g.n, 0) < 2 THEN 'group_too_small'
            WHEN g.lo = g.hi AND g.hi <= 0 THEN 'all_wrong'
            WHEN g.lo = g.hi AND g.lo >= 1 THEN 'all_right'
            ELSE 'other_equal'
        END AS kind
    FROM lost AS l
    LEFT JOIN groups AS g USING (group_id)
)
SELECT
    CASE WHEN $by = 'step' THEN step END AS step,
    CASE WHEN $by = 'environment' THEN environment END AS environment,
    CASE WHEN $by = 'task' THEN task_id END AS task,
    count(DISTINCT group_key) FILTER (kind = 'all_wrong') AS all_wrong_groups,
    count(DISTINCT group_key) FILTER (kind = 'all_right') AS all_right_groups,
    count(DISTINCT group_key) FILTER (kind = 'other_equal') AS other_equal_groups,
    count(DISTINCT group_key) FILTER (kind = 'group_too_small') AS group_too_small_groups,
    count(*) FILTER (kind = 'all_wrong') AS all_wrong_rollouts,
    count(*) FILTER (kind = 'all_right') AS all_right_rollouts,
    count(*) FILTER (kind = 'other_equal') AS other_equal_rollouts,
    count(*) FILTER (kind = 'group_too_small') AS group_too_small_rollouts,
    count(*) AS zero_signal_rollouts
FROM kinds
GROUP BY ALL
ORDER BY ALL NULLS LAST
