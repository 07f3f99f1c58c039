-- Compute terms C_rollout, C_train, C_teacher, C_judge, C_env (docs/metrics.md), for the run or per step.
-- FLOPs come from tokens and model sizes. Device-seconds are devices x busy time per process, where busy time
-- is the length of the UNION of the process's work intervals (gaps and islands, below), so 64
-- requests in flight on one server count once. env is CPU: device_seconds holds Σ execute_tool seconds and
-- flops is NULL.
-- By step, a rollout's work counts at the step that consumed it and a train step at its own index
-- (queries/sql/analyses/macros/04_compute_work.sql). Train steps belong to no environment: with an environment
-- filter the train term is NULL.
-- Per-step sums kept ahead of time, plus the pending work they do not hold (macros/04). Busy time per process
-- is kept ahead too (_compute_busy, macros/04): per step or for the whole run, per environment or over all;
-- only the whole run over a step range is swept here, from the busy islands of the steps in the range.
-- C_total (flops_total, device_seconds_total, on every row of its step or of the run) is the sum of the
-- accelerator terms (rollout, train, teacher, judge; never env, which is CPU); flops_share and
-- device_seconds_share are each term's share of it (NULL for env, and while C_total is 0).
WITH pending AS MATERIALIZED (
    SELECT term, role, instance_id, devices, start_ns, end_ns, step, environment, flops
    FROM _pending_work($run_id)
),
sums AS (
    SELECT term, step, environment, flops, span_ns FROM _step_sums($run_id)
    UNION ALL
    SELECT term, step, environment, sum(flops), sum(end_ns - start_ns) FROM pending GROUP BY ALL
),
kept_sums AS (
    SELECT *, CASE WHEN $by = 'step' THEN step END AS key
    FROM sums
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
flops AS (
    SELECT key, term, sum(flops)::DOUBLE AS flops, sum(span_ns) / 1e9 AS span_seconds
    FROM kept_sums
    GROUP BY ALL
),
ranged AS (
    SELECT $by IS NULL AND ($step_lo IS NOT NULL OR $step_hi IS NOT NULL) AS swept_here
),
-- Busy seconds per process kept ahead: by step (a step range keeps its steps), or the whole run.
kept_busy AS (
    SELECT CASE WHEN $by = 'step' THEN step END AS key, term, instance_id, devices, busy_ns / 1e9 AS seconds
    FROM _compute_busy($run_id)
    WHERE NOT (SELECT swept_here FROM ranged)
      AND by_step = coalesce($by = 'step', false)
      AND all_environments = ($environment IS NULL)
      AND ($environment IS NULL OR environment = $environment)
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
),
-- The whole run over a step range: each process's own kind of work in the range (a rollout process's turns, a
-- trainer's steps, ...), as busy islands per step plus pending work.
intervals AS (
    SELECT term, instance_id, devices, step, environment, start_ns, end_ns
    FROM _busy_intervals($run_id)
    WHERE (SELECT swept_here FROM ranged)
    UNION ALL
    SELECT term, instance_id, devices, step, environment, start_ns, end_ns
    FROM pending
    WHERE (SELECT swept_here FROM ranged) AND role = term AND term <> 'env' AND end_ns > start_ns
),
kept_intervals AS (
    SELECT *
    FROM intervals
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
-- The union of a process's intervals, as gaps and islands: in start order, a gap opens where an interval
-- starts after the running max of the earlier intervals' ends (a window function); each interval adds only
-- its part beyond that running max, so the sum over a process is the total length of its islands and
-- overlapping requests count once.
swept AS (
    SELECT
        term, instance_id, devices, end_ns,
        greatest(
            start_ns,
            coalesce(
                max(end_ns) OVER (
                    PARTITION BY term, instance_id ORDER BY start_ns, end_ns
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                ),
                start_ns
            )
        ) AS new_from_ns
    FROM kept_intervals
),
per_process AS (
    SELECT key, term, instance_id, devices, seconds FROM kept_busy
    UNION ALL
    SELECT
        NULL AS key, term, instance_id, max(devices) AS devices,
        sum(greatest(0, end_ns - new_from_ns)) / 1e9 AS seconds
    FROM swept
    GROUP BY term, instance_id
),
busy AS (
    SELECT
        key, term,
        count(*) AS processes,
        sum(seconds) AS busy_s,
        sum(seconds * coalesce(devices, 0)) AS device_seconds
    FROM per_process
    GROUP BY key, term
),
terms AS (
    SELECT * FROM (VALUES ('rollout', 1), ('train', 2), ('teacher', 3), ('judge', 4), ('env', 5)) AS v(term, ord)
),
keys AS (
    SELECT DISTINCT key FROM kept_sums
    UNION
    SELECT NULL WHERE $by IS NULL
),
per_term AS (
    SELECT
        k.key AS step,
        t.term,
        t.ord,
        CASE
            WHEN t.term = 'env' OR (t.term = 'train' AND $environment IS NOT NULL) THEN NULL
            ELSE coalesce(f.flops, 0)
        END AS flops,
        CASE
            WHEN t.term = 'env' THEN coalesce(f.span_seconds, 0)
            WHEN t.term = 'train' AND $environment IS NOT NULL THEN NULL
            ELSE coalesce(b.device_seconds, 0)
        END AS device_seconds,
        CASE
            WHEN t.term = 'env' THEN coalesce(f.span_seconds, 0)
            WHEN t.term = 'train' AND $environment IS NOT NULL THEN NULL
            ELSE coalesce(b.busy_s, 0)
        END AS busy_s,
        coalesce(b.processes, 0) AS processes
    FROM keys AS k
    CROSS JOIN terms AS t
    LEFT JOIN flops AS f ON f.term = t.term AND f.key IS NOT DISTINCT FROM k.key
    LEFT JOIN busy AS b ON b.term = t.term AND b.key IS NOT DISTINCT FROM k.key
),
-- C_total added up term by term in a fixed order, so the same run gives the same bits every time (a window
-- sum adds in whatever order its threads meet the rows).
totals AS (
    SELECT
        step,
        coalesce(any_value(flops) FILTER (term = 'rollout'), 0)
            + coalesce(any_value(flops) FILTER (term = 'train'), 0)
            + coalesce(any_value(flops) FILTER (term = 'teacher'), 0)
            + coalesce(any_value(flops) FILTER (term = 'judge'), 0) AS flops_total,
        coalesce(any_value(device_seconds) FILTER (term = 'rollout'), 0)
            + coalesce(any_value(device_seconds) FILTER (term = 'train'), 0)
            + coalesce(any_value(device_seconds) FILTER (term = 'teacher'), 0)
            + coalesce(any_value(device_seconds) FILTER (term = 'judge'), 0) AS device_seconds_total
    FROM per_term
    GROUP BY step
)
SELECT
    p.step, p.term, p.flops, p.device_seconds, p.busy_s, p.processes,
    CASE WHEN p.term <> 'env' THEN p.flops / nullif(t.flops_total, 0) END AS flops_share,
    CASE WHEN p.term <> 'env' THEN p.device_seconds / nullif(t.device_seconds_total, 0) END
        AS device_seconds_share,
    t.flops_total,
    t.device_seconds_total
FROM per_term AS p
JOIN totals AS t ON t.step IS NOT DISTINCT FROM p.step
ORDER BY p.step NULLS LAST, p.ord
