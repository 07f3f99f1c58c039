-- How many rollouts the run holds, from the per-step funnel sums (a few rows per step, so it costs the same
-- at any size): whether a page picks its figures' examples itself (examples.inline).
SELECT coalesce(sum(rollouts), 0)::BIGINT AS rollouts FROM _funnel_sums($run_id)
