-- What each lever buys (docs/advisor.md), one row per lever, from its change ($levers: per lever, its row's
-- `_change`, macros/10_advice.sql: usable_after, NULL where it does not apply, and Δwork per term) and the
-- measured starting point ($base, advice_base.sql's row). Each term's device-seconds move with its work at the
-- run's utilization u = device-seconds / work-seconds; the trainer's work follows the tokens it trains on:
--   Δwork_train = slope · ((usable_after − usable) · tokens per usable + Δtrain tokens)
--   D_after     = D + Σ_term u_term · Δwork_term
--   gain        = (usable_after / D_after) / (usable / D) − 1
-- All the levers at once, in one query: each lever's own query reads only its figures.
WITH b AS (SELECT unnest($base)),
levers AS (SELECT unnest($levers, recursive := true)),
d AS (
    SELECT
        l.lever, l.usable_after, l.d_rollout_s, l.d_judge_s, l.d_teacher_s,
        b.*,
        b.train_s_per_token
            * ((l.usable_after - b.usable) * coalesce(b.tokens_per_usable, 0) + coalesce(l.d_train_tokens, 0))
            AS d_train_s,
        b.rollout_device_s / nullif(b.rollout_work_s, 0) AS u_rollout,
        b.train_device_s / nullif(b.train_work_s, 0) AS u_train,
        b.judge_device_s / nullif(b.judge_work_s, 0) AS u_judge,
        b.teacher_device_s / nullif(b.teacher_work_s, 0) AS u_teacher
    FROM levers AS l, b
),
a AS (
    SELECT
        d.*,
        d.device_seconds
            + coalesce(u_rollout * d_rollout_s, 0) + coalesce(u_train * d_train_s, 0)
            + coalesce(u_judge * d_judge_s, 0) + coalesce(u_teacher * d_teacher_s, 0) AS device_seconds_after
    FROM d
)
SELECT
    lever,
    usable,
    usable * tokens_per_usable AS usable_tokens,
    usable_after * tokens_per_usable AS usable_tokens_after,
    device_seconds,
    device_seconds_after,
    coalesce(u_rollout * d_rollout_s, 0) AS rollout_device_s_delta,
    coalesce(u_train * d_train_s, 0) AS train_device_s_delta,
    coalesce(u_judge * d_judge_s, 0) AS judge_device_s_delta,
    coalesce(u_teacher * d_teacher_s, 0) AS teacher_device_s_delta,
    usable_per_device_s,
    usable_after / nullif(device_seconds_after, 0) AS usable_per_device_s_after,
    (usable_after / nullif(device_seconds_after, 0)) / nullif(usable_per_device_s, 0) - 1 AS gain
FROM a
