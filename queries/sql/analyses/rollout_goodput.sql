-- The rollout fleet's goodput per step (docs/metrics.md, "Goodput"): device-seconds (seconds × the process's
-- rl.compute.devices) of every rollout process in each step's window, in states that take precedence in
-- this order: generating (a turn running), waiting for new weights (no turn running while an rl.weight_sync
-- is under way), waiting on tools (none running, one of its rollouts in flight: tools, scoring, queues),
-- idle. Step NULL (last) is time outside every step's window (before the first step, after the last).
SELECT
    step,
    sum(coalesce(generating_s, 0) * devices) AS generating_device_s,
    sum(coalesce(weights_wait_s, 0) * devices) AS weights_wait_device_s,
    sum(coalesce(tools_wait_s, 0) * devices) AS tools_wait_device_s,
    sum(coalesce(idle_s, 0) * devices) AS idle_device_s,
    sum(coalesce(generating_s, 0) * devices)
        / nullif(sum((coalesce(generating_s, 0) + coalesce(weights_wait_s, 0) + coalesce(tools_wait_s, 0)
                      + coalesce(idle_s, 0)) * devices), 0) AS generating_share
FROM _rollout_goodput($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
GROUP BY step
ORDER BY step NULLS LAST
