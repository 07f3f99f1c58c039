-- Where the funnel loses rollouts: per stage, how many and why (infra_error, aborted, invalid, judge
-- timeout, judge error, no reward, no group_id, only scored attempt in its group, all-equal group, stale, not
-- consumed yet). rollout_stages' 'group too small' is told apart here: a rollout that records no group_id,
-- or one whose group has no other scored attempt to compare its reward with.
-- Counted from the rollouts per step, environment and outcome kept ahead (_funnel_sums, macros/07).
SELECT
    lost_at AS stage,
    reason,
    sum(rollouts)::BIGINT AS lost
FROM _funnel_sums($run_id)
WHERE lost_at IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY 1, 2
ORDER BY
    CASE stage WHEN 'completed' THEN 1 WHEN 'scored' THEN 2 WHEN 'nonzero_signal' THEN 3 ELSE 4 END,
    lost DESC, reason
