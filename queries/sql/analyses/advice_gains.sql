-- What each lever buys (docs/advisor.md), from its change ($levers: per lever, its `_change`, _advice_change in
-- macros/10_advice.sql) and the measured starting point ($base, advice_base.sql's row): device-seconds after
--   D_after = D + Σ_term u_term · Δwork_term   (the trainer's Δwork following the samples it trains on)
-- and the gain in usable rollouts per device-second, (usable_after / D_after) / (usable / D) − 1, by
-- _advice_row; one row per lever. usable_after itself stays the lever's own figure (its row's column).
WITH b AS (SELECT unnest($base)),
levers AS (SELECT unnest($levers, recursive := true))
SELECT l.lever, r.* EXCLUDE (usable_after)
FROM levers AS l, b, _advice_row(b, l.usable_after, l.d_rollout_s, l.d_judge_s, l.d_teacher_s) AS r
