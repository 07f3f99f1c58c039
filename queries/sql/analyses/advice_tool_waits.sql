-- Advisor lever "tool waits" (docs/advisor.md): rollout-server device time left idle while the rollouts on it
-- wait on tools and sandboxes, recoverable by admitting more concurrent rollouts per device. A rollout server
-- is held from the first train step's start to the last one's end; its busy time is compute_terms' union of
-- its turns, so
--   idle device-seconds = Σ_rollout servers devices × held seconds − rollout device-seconds
-- Filled with rollouts at the measured rate, idle device-seconds already paid for produce more of them:
--   usable_after = usable × (1 + idle / rollout device-seconds),  the rollout pool's device-seconds unchanged.
-- Does not apply without tool calls, or when the servers are idle less than $min_idle_share of the time.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
held AS (
    SELECT (max(end_ns) - min(start_ns)) / 1e9 AS held_s
    FROM train_steps
    WHERE run_id = $run_id AND train_step IS NOT NULL
      AND ($step_lo IS NULL OR train_step >= $step_lo) AND ($step_hi IS NULL OR train_step <= $step_hi)
),
servers AS (
    SELECT count(DISTINCT instance_id) AS servers, sum(DISTINCT_devices) AS devices
    FROM (
        SELECT instance_id, max(coalesce(devices, 0)) AS DISTINCT_devices
        FROM _compute_busy($run_id)
        WHERE term = 'rollout' AND NOT by_step AND all_environments
        GROUP BY instance_id
    )
),
tools AS (
    SELECT sum(span_ns) FILTER (term = 'env') / 1e9 AS tool_s, sum(span_ns) FILTER (term = 'rollout') / 1e9 AS turn_s
    FROM _step_sums($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
est AS (
    SELECT
        s.servers,
        h.held_s,
        t.tool_s / nullif(t.tool_s + t.turn_s, 0) AS tool_wait_share,
        greatest(0, s.devices * h.held_s - b.rollout_device_s) AS idle_device_s,
        greatest(0, s.devices * h.held_s - b.rollout_device_s) / nullif(s.devices * h.held_s, 0) AS idle_share
    FROM b, held AS h, servers AS s, tools AS t
),
judged AS (
    SELECT
        e.*,
        coalesce(e.tool_wait_share > 0 AND e.idle_share >= $min_idle_share, false) AS applies,
        CASE
            WHEN coalesce(e.tool_wait_share, 0) = 0 THEN 'no tool or sandbox calls'
            WHEN coalesce(e.idle_share, 0) < $min_idle_share THEN 'the rollout servers are busy nearly all the time'
        END AS why_not,
        'rollout_idle_share' AS metric,
        e.idle_share AS before,
        0.0 AS after,
        b.usable * (1 + e.idle_device_s / nullif(b.rollout_device_s, 0)) AS usable_after
    FROM est AS e, b
)
SELECT 'tool_waits' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, 0.0, 0.0, 0.0) AS _change
FROM judged AS j
