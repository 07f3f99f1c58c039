-- Device-seconds spent on rollouts that were never used, per consuming step (docs/metrics.md, "Goodput"):
-- a rollout's device-seconds are its share of its rollout process's turn seconds times that process's
-- generating device-seconds over the run (concurrent turns share the devices). infra_error and aborted
-- count rollouts that ended so; unused counts the others not usable (no score, no signal, stale, or not yet
-- consumed: step NULL, last); total_device_s is every rollout's.
WITH procs AS (
    SELECT instance_id, sum(coalesce(generating_s, 0) * devices) AS generating_device_s
    FROM _rollout_goodput($run_id)
    GROUP BY instance_id
),
turn_totals AS (
    SELECT instance_id, sum(turn_s) AS turn_s FROM _rollout_devices($run_id) GROUP BY instance_id
),
per_rollout AS (
    SELECT d.rollout_id, sum(d.turn_s / nullif(t.turn_s, 0) * p.generating_device_s) AS device_s
    FROM _rollout_devices($run_id) AS d
    JOIN turn_totals AS t USING (instance_id)
    JOIN procs AS p USING (instance_id)
    GROUP BY d.rollout_id
)
SELECT
    st.step,
    sum(r.device_s) FILTER (st.rollout_status = 'infra_error') AS infra_error_device_s,
    sum(r.device_s) FILTER (st.rollout_status = 'aborted') AS aborted_device_s,
    sum(r.device_s) FILTER (st.rollout_status NOT IN ('infra_error', 'aborted') AND NOT st.usable)
        AS unused_device_s,
    sum(r.device_s) AS total_device_s
FROM per_rollout AS r
JOIN rollout_stages($run_id) AS st USING (rollout_id)
WHERE ($step_lo IS NULL OR st.step >= $step_lo)
  AND ($step_hi IS NULL OR st.step <= $step_hi)
  AND ($environment IS NULL OR st.environment = $environment)
GROUP BY st.step
ORDER BY st.step NULLS LAST
