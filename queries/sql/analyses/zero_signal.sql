-- Why groups carry no signal (docs/metrics.md, "Learning"): the rollouts lost at the nonzero-signal stage and
-- their groups, split by the group's scored rewards: all_wrong (all equal, at most 0: too hard), all_right (all
-- equal, at least 1: too easy), other_equal (all equal in between, or the trainer's own zero-signal call on
-- rewards that vary) and group_too_small (fewer than two scored attempts). For the run or per consuming step,
-- environment or task ($by); the other keys stay NULL.
WITH lost AS (
    SELECT rollout_id, group_id, step, environment, task_id FROM rollout_stages($run_id)
    WHERE lost_at = 'nonzero_signal'
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
groups AS (
    SELECT group_id, count(*) AS n, min(reward) AS lo, max(reward) AS hi
    FROM rollout_stages($run_id)
    WHERE scored AND reward IS NOT NULL AND group_id IS NOT NULL
    GROUP BY group_id
),
per_group AS (  -- one row per group (and key): its kind and the rollouts of it lost here
    SELECT
        CASE WHEN $by = 'step' THEN l.step END AS step,
        CASE WHEN $by = 'environment' THEN l.environment END AS environment,
        CASE WHEN $by = 'task' THEN l.task_id END AS task,
        coalesce(l.group_id, l.rollout_id) AS group_key,
        CASE
            WHEN coalesce(g.n, 0) < 2 THEN 'group_too_small'
            WHEN g.lo = g.hi AND g.hi <= 0 THEN 'all_wrong'
            WHEN g.lo = g.hi AND g.lo >= 1 THEN 'all_right'
            ELSE 'other_equal'
        END AS kind,
        count(*) AS rollouts
    FROM lost AS l
    LEFT JOIN groups AS g USING (group_id)
    GROUP BY ALL
)
SELECT
    step, environment, task,
    count(*) FILTER (kind = 'all_wrong') AS all_wrong_groups,
    count(*) FILTER (kind = 'all_right') AS all_right_groups,
    count(*) FILTER (kind = 'other_equal') AS other_equal_groups,
    count(*) FILTER (kind = 'group_too_small') AS group_too_small_groups,
    coalesce(sum(rollouts) FILTER (kind = 'all_wrong'), 0)::BIGINT AS all_wrong_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'all_right'), 0)::BIGINT AS all_right_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'other_equal'), 0)::BIGINT AS other_equal_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'group_too_small'), 0)::BIGINT AS group_too_small_rollouts,
    sum(rollouts)::BIGINT AS zero_signal_rollouts
FROM per_group
GROUP BY step, environment, task
ORDER BY step, environment, task NULLS LAST
