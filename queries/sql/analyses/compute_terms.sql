-- Compute terms C_rollout, C_train, C_teacher, C_judge, C_env (docs/metrics.md), for the run or per step.
-- FLOPs come from tokens and model sizes. Device-seconds are devices x busy time per process, where busy time
-- is the length of the UNION of the process's work intervals (gaps and islands, below), so 64
-- requests in flight on one server count once. env is CPU: device_seconds holds Σ execute_tool seconds and
-- flops is NULL.
-- By step, a rollout's work counts at the step that consumed it and a train step at its own index. Train
-- steps belong to no environment: with an environment filter the train term is NULL.
WITH consumed AS (
    SELECT rollout_id, step
    FROM rollout_steps($run_id)
    WHERE $by = 'step' OR $step_lo IS NOT NULL OR $step_hi IS NOT NULL
),
rollout_of AS (
    SELECT rollout_id, environment FROM rollouts WHERE run_id = $run_id AND $environment IS NOT NULL
),
work AS (
    SELECT
        'rollout' AS term, t.role, t.instance_id, t.devices, t.start_ns, t.end_ns, c.step, t.environment,
        2.0 * t.model_parameters * (coalesce(t.new_input_tokens, 0) + coalesce(t.output_tokens, 0)) AS flops
    FROM turns AS t
    LEFT JOIN consumed AS c USING (rollout_id)
    WHERE t.run_id = $run_id
    UNION ALL
    SELECT
        'teacher', x.role, x.instance_id, x.devices, x.start_ns, x.end_ns, c.step, r.environment,
        2.0 * x.parameters * coalesce(x.teacher_tokens, 0)
    FROM teachers AS x
    LEFT JOIN consumed AS c USING (rollout_id)
    LEFT JOIN rollout_of AS r USING (rollout_id)
    WHERE x.run_id = $run_id
    UNION ALL
    SELECT
        'judge', j.role, j.instance_id, j.devices, j.start_ns, j.end_ns, c.step, r.environment,
        2.0 * j.parameters * (coalesce(j.input_tokens, 0) + coalesce(j.output_tokens, 0))
    FROM judges AS j
    LEFT JOIN consumed AS c USING (rollout_id)
    LEFT JOIN rollout_of AS r USING (rollout_id)
    WHERE j.run_id = $run_id
    UNION ALL
    SELECT
        'train', role, instance_id, devices,
        start_ns + CAST(coalesce(train_wait_s, 0) * 1e9 AS BIGINT), end_ns, train_step, NULL,
        6.0 * model_parameters * coalesce(train_tokens, 0)
    FROM train_steps
    WHERE run_id = $run_id AND $environment IS NULL
    UNION ALL
    SELECT 'env', 'env', x.instance_id, x.devices, x.start_ns, x.end_ns, c.step, r.environment, NULL
    FROM tools AS x
    LEFT JOIN consumed AS c USING (rollout_id)
    LEFT JOIN rollout_of AS r USING (rollout_id)
    WHERE x.run_id = $run_id
),
kept AS (
    SELECT *, CASE WHEN $by = 'step' THEN step END AS key
    FROM work
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
flops AS (
    SELECT key, term, sum(flops) AS flops, sum((end_ns - start_ns) / 1e9) AS span_seconds
    FROM kept
    GROUP BY ALL
),
-- Busy intervals: each process's own kind of work (a rollout process's turns, a trainer's steps, ...).
intervals AS (
    SELECT key, term, instance_id, devices, start_ns, end_ns
    FROM kept
    WHERE role = term AND term <> 'env' AND end_ns > start_ns
),
-- The union of a process's intervals, as gaps and islands: in start order, a gap opens where an interval
-- starts after the running max of the earlier intervals' ends (a window function); each interval adds only
-- its part beyond that running max, so the sum over a process is the total length of its islands and
-- overlapping requests count once.
swept AS (
    SELECT
        key, term, instance_id, devices, end_ns,
        greatest(
            start_ns,
            coalesce(
                max(end_ns) OVER (
                    PARTITION BY key, term, instance_id ORDER BY start_ns
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                ),
                start_ns
            )
        ) AS new_from_ns
    FROM intervals
),
per_process AS (
    SELECT
        key, term, instance_id, max(devices) AS devices,
        sum(greatest(0, end_ns - new_from_ns)) / 1e9 AS seconds
    FROM swept
    GROUP BY key, term, instance_id
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
    SELECT DISTINCT key FROM kept
    UNION
    SELECT NULL WHERE $by IS NULL
)
SELECT
    k.key AS step,
    t.term,
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
ORDER BY k.key NULLS LAST, t.ord
