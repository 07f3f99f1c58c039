-- Advisor lever "task selection" (docs/advisor.md): drop or down-weight tasks whose recent groups were all
-- right or all wrong, raising the nonzero-signal rate n to $target_nonzero_signal (the reference's realistic
-- setting: 0.60 → 0.80). Dispatched work is unchanged, so
--   usable_after = usable × target / n
-- and only the trainer's work grows (with the samples it trains on; macros/10_advice.sql).
-- Evidence: all-equal groups split into all-right (every reward > 0) and all-wrong, and the tasks saturated in
-- every group they had (per-task saturation). Does not apply when no group has two scored attempts or n is
-- already at the target.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
groups AS (
    SELECT group_id, task AS task_id, reward_lo AS lo, reward_hi AS hi
    FROM _advice_groups($run_id, $step_lo, $step_hi)
    WHERE rewarded >= 2
),
tasks AS (
    SELECT task_id, bool_and(lo = hi) AS saturated FROM groups GROUP BY task_id
),
evidence AS (
    SELECT
        (SELECT count(*) FROM groups) AS groups,
        (SELECT count(*) FILTER (lo = hi AND lo > 0) FROM groups) AS all_right_groups,
        (SELECT count(*) FILTER (lo = hi AND lo <= 0) FROM groups) AS all_wrong_groups,
        (SELECT count(*) FROM tasks) AS tasks,
        (SELECT count(*) FILTER (saturated) FROM tasks) AS saturated_tasks
),
est AS (
    SELECT
        e.*,
        e.groups > 0 AND b.nonzero_signal_rate < $target_nonzero_signal AS applies,
        CASE
            WHEN e.groups = 0 THEN 'no group has two scored attempts'
            WHEN b.nonzero_signal_rate >= $target_nonzero_signal THEN 'the nonzero-signal rate is already at the target'
        END AS why_not,
        'nonzero_signal_rate' AS metric,
        b.nonzero_signal_rate AS before,
        $target_nonzero_signal::DOUBLE AS after,
        b.usable * $target_nonzero_signal / nullif(b.nonzero_signal_rate, 0) AS usable_after,
        0.0 AS d_rollout_s, 0.0 AS d_judge_s, 0.0 AS d_teacher_s
    FROM evidence AS e, b
)
SELECT 'task_selection' AS lever, e.*,
    _advice_change(CASE WHEN e.applies THEN e.usable_after END, 0.0, 0.0, 0.0) AS _change
FROM est AS e
