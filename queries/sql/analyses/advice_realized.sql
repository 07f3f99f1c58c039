-- The advisor's realized gain (docs/advisor.md, "The realized gain"; what the estimate-vs-realized tests compare
-- each lever's estimate with): run $run_after is run $run_id with a lever pulled. Each term's device-seconds
-- are taken at $run_id's utilization, moving with the term's work-seconds, as the advisor costs a lever:
--   D_after = Σ_terms device_s(before) × work_s(after) / work_s(before)   (0 for a term without work before)
--   realized_gain = (usable(after) / D_after) / (usable / D)(before) − 1
-- NULL when the run before has no usable rollouts or device-seconds, or D_after is 0. Both from _advice_base.
WITH a AS (SELECT * FROM _advice_base($run_id, $step_lo, $step_hi)),
b AS (SELECT * FROM _advice_base($run_after, $step_lo, $step_hi)),
d AS (
    SELECT
        coalesce(a.rollout_device_s * b.rollout_work_s / nullif(a.rollout_work_s, 0), 0)
            + coalesce(a.train_device_s * b.train_work_s / nullif(a.train_work_s, 0), 0)
            + coalesce(a.judge_device_s * b.judge_work_s / nullif(a.judge_work_s, 0), 0)
            + coalesce(a.teacher_device_s * b.teacher_work_s / nullif(a.teacher_work_s, 0), 0) AS device_seconds_after
    FROM a, b
)
SELECT
    (b.usable / nullif(d.device_seconds_after, 0)) / nullif(a.usable_per_device_s, 0) - 1 AS realized_gain
FROM a, b, d
