-- Where the funnel loses rollouts: per stage, how many and why (infra_error, aborted, invalid, judge
-- timeout, judge error, no reward, group too small, all-equal group, stale, not consumed yet).
SELECT lost_at AS stage, lost_reason AS reason, count(*) AS lost
FROM rollout_stages($run_id)
WHERE lost_at IS NOT NULL
  AND ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY lost_at, lost_reason
ORDER BY
    CASE lost_at WHEN 'completed' THEN 1 WHEN 'scored' THEN 2 WHEN 'nonzero_signal' THEN 3 ELSE 4 END,
    lost DESC, reason
