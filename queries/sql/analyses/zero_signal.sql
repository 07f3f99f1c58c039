-- Why groups carry no signal (docs/metrics.md, "Learning"): the rollouts lost at the nonzero-signal stage and
-- their groups, split by the group's scored rewards: all_wrong (all equal, at most 0: too hard), all_right (all
-- equal, at least 1: too easy), other_equal (all equal in between, or the trainer's own zero-signal call on
-- rewards that vary) and group_too_small (fewer than two scored attempts). For the run or per consuming step,
-- environment or task ($by); the other keys stay NULL.
-- Counted from the lost rollouts per step, environment, task and group kept ahead (_zero_signal_sums,
-- macros/09_learning.sql); a rollout of no group is a group of its own.
WITH per_group AS (  -- one row per group (and key): its kind and the rollouts of it lost here
    SELECT
        CASE WHEN $by = 'step' THEN step END AS step,
        CASE WHEN $by = 'environment' THEN environment END AS environment,
        CASE WHEN $by = 'task' THEN task END AS task,
        group_id,
        kind,
        CASE WHEN group_id IS NULL THEN sum(rollouts) ELSE 1 END AS groups,
        sum(rollouts) AS rollouts
    FROM _zero_signal_sums($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
    GROUP BY 1, 2, 3, group_id, kind
)
SELECT
    step, environment, task,
    coalesce(sum(groups) FILTER (kind = 'all_wrong'), 0)::BIGINT AS all_wrong_groups,
    coalesce(sum(groups) FILTER (kind = 'all_right'), 0)::BIGINT AS all_right_groups,
    coalesce(sum(groups) FILTER (kind = 'other_equal'), 0)::BIGINT AS other_equal_groups,
    coalesce(sum(groups) FILTER (kind = 'group_too_small'), 0)::BIGINT AS group_too_small_groups,
    coalesce(sum(rollouts) FILTER (kind = 'all_wrong'), 0)::BIGINT AS all_wrong_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'all_right'), 0)::BIGINT AS all_right_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'other_equal'), 0)::BIGINT AS other_equal_rollouts,
    coalesce(sum(rollouts) FILTER (kind = 'group_too_small'), 0)::BIGINT AS group_too_small_rollouts,
    sum(rollouts)::BIGINT AS zero_signal_rollouts
FROM per_group
GROUP BY step, environment, task
ORDER BY step, environment, task NULLS LAST
