-- Where one rollout stands in the usable-experience funnel (rollout_stages, docs/metrics.md): the stage flags,
-- the stage it was lost at and why (as funnel_losses.sql names the reasons), the train step that consumed it,
-- the trainer's decision and its staleness. No row for a rollout whose rl.rollout span has not arrived.
SELECT
    rollout_id, step, decision, staleness, staleness_bound, completed, scored, nonzero_signal, fresh, usable,
    lost_at,
    _loss_reason(lost_reason, group_id) AS lost_reason
FROM rollout_stages($run_id)
WHERE rollout_id = $rollout_id
LIMIT 1
