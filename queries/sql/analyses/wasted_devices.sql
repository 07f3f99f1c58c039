-- Device-seconds spent on rollouts that were never used, per consuming step (docs/metrics.md, "Goodput"):
-- a rollout's device-seconds are its share of its rollout process's turn seconds times that process's
-- generating device-seconds over the run (concurrent turns share the devices). infra_error and aborted
-- count rollouts that ended so; unused counts the others not usable (no score, no signal, stale, or not yet
-- consumed: step NULL, last); total_device_s is every rollout's. Reads the per-step, per-environment sums
-- (_wasted_sums_src in macros/08_health.sql).
SELECT
    step,
    sum(infra_error_device_s) AS infra_error_device_s,
    sum(aborted_device_s) AS aborted_device_s,
    sum(unused_device_s) AS unused_device_s,
    sum(total_device_s) AS total_device_s
FROM _wasted_sums($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND ($environment IS NULL OR environment = $environment)
GROUP BY step
ORDER BY step NULLS LAST
