-- The work the compute terms count (docs/metrics.md, "Compute terms"; compute_terms.sql sums it).
-- _work_rows_src(run): one row per span of work: generation (the rollout term, 2·P·(new prefill + decode
-- tokens)), teacher scoring, judging, tool / sandbox calls (term env: CPU work, no FLOPs) and train steps
-- (timed from when their data was ready), with the rollout, train step and trace each belongs to. FLOPs are
-- integers, so sums do not depend on the order rows arrived in.
CREATE OR REPLACE MACRO _work_rows_src(run) AS TABLE
SELECT
    'rollout' AS term, role, instance_id, devices, start_ns, end_ns, rollout_id, NULL::BIGINT AS train_step,
    2 * model_parameters::HUGEINT * (coalesce(new_input_tokens, 0) + coalesce(output_tokens, 0)) AS flops, trace_id
FROM turns
WHERE run_id = run
UNION ALL
SELECT
    'teacher', role, instance_id, devices, start_ns, end_ns, rollout_id, NULL,
    2 * parameters::HUGEINT * coalesce(teacher_tokens, 0), trace_id
FROM teachers
WHERE run_id = run
UNION ALL
SELECT
    'judge', role, instance_id, devices, start_ns, end_ns, rollout_id, NULL,
    2 * parameters::HUGEINT * (coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), trace_id
FROM judges
WHERE run_id = run
UNION ALL
SELECT
    'train', role, instance_id, devices, start_ns + CAST(coalesce(train_wait_s, 0) * 1e9 AS BIGINT), end_ns,
    NULL, train_step, 6 * model_parameters::HUGEINT * coalesce(train_tokens, 0), trace_id
FROM train_steps
WHERE run_id = run
UNION ALL
SELECT 'env', 'env', instance_id, devices, start_ns, end_ns, rollout_id, NULL, NULL, trace_id
FROM tools
WHERE run_id = run;
-- The step a piece of work counts at: a rollout's work at the step that consumed the rollout (NULL: none yet),
-- a train step's at its own index.
CREATE OR REPLACE MACRO _work_step(term, train_step, consumed_step) AS
    CASE WHEN term = 'train' THEN train_step ELSE consumed_step END;
-- _compute_work_src(run): every piece of work with its step and its rollout's environment.
CREATE OR REPLACE MACRO _compute_work_src(run) AS TABLE
SELECT w.*, _work_step(w.term, w.train_step, c.step) AS step, c.environment
FROM _work_rows_src(run) AS w
LEFT JOIN rollout_steps(run) AS c USING (rollout_id);
-- The name compute_terms.sql reads; a reader reads it from the store's derived table (queries/tables.py).
CREATE OR REPLACE MACRO _compute_work(run) AS TABLE SELECT * FROM _compute_work_src(run);
-- _step_sums_src(run, steps): FLOPs and span nanoseconds of the consumed work per term, step and environment
-- (steps: a list of steps, NULL for all).
CREATE OR REPLACE MACRO _step_sums_src(run, steps) AS TABLE
SELECT term, step, environment, sum(flops) AS flops, sum(end_ns - start_ns) AS span_ns
FROM _compute_work(run)
WHERE step IS NOT NULL AND (steps IS NULL OR step IN (SELECT unnest(steps)))
GROUP BY ALL;
-- _step_islands_src(run, steps): when each process was busy with its own kind of work (a rollout server's
-- turns, a trainer's steps, ...) per step and environment, as the union of its work intervals: overlapping
-- intervals merged into one island. In start order an interval opens a new island when it starts after every
-- earlier one ended, so 64 requests in flight on one server make one island. Equal intervals are taken once
-- first: the two windows below must see one order, and rows tied on (start, end) could be ordered differently
-- in each, splitting one island in two (a trainer's teacher calls of one step all start and end together).
CREATE OR REPLACE MACRO _step_islands_src(run, steps) AS TABLE
WITH intervals AS (
    SELECT term, instance_id, max(devices) AS devices, step, environment, start_ns, end_ns
    FROM _compute_work(run)
    WHERE step IS NOT NULL AND (steps IS NULL OR step IN (SELECT unnest(steps)))
      AND role = term AND term <> 'env' AND end_ns > start_ns
    GROUP BY term, instance_id, step, environment, start_ns, end_ns
),
reach AS (
    SELECT
        *,
        max(end_ns) OVER (
            PARTITION BY term, instance_id, step, environment ORDER BY start_ns, end_ns
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS earlier_end_ns
    FROM intervals
),
numbered AS (
    SELECT
        *,
        count(*) FILTER (WHERE earlier_end_ns IS NULL OR start_ns > earlier_end_ns) OVER (
            PARTITION BY term, instance_id, step, environment ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING
        ) AS island
    FROM reach
)
SELECT
    term, instance_id, step, environment, max(devices) AS devices, min(start_ns) AS start_ns, max(end_ns) AS end_ns
FROM numbered
GROUP BY term, instance_id, step, environment, island;
-- What compute_terms.sql reads: FLOP sums and busy intervals per step kept ahead of time, and the work not kept
-- in them, which it sums (and, for the whole run over a step range, sweeps) itself; busy time per process comes
-- from _compute_busy, below. Here nothing is kept ahead, so every piece of work is pending and
-- computed once per query. A reader reads the consumed work's sums and busy islands per step from the store's
-- derived tables (queries/tables.py), leaving only unconsumed work pending: a query sweeps thousands of rows, not millions.
CREATE OR REPLACE MACRO _step_sums(run) AS TABLE
SELECT NULL::VARCHAR AS term, NULL::BIGINT AS step, NULL::VARCHAR AS environment, NULL::HUGEINT AS flops,
       NULL::HUGEINT AS span_ns
WHERE false;
CREATE OR REPLACE MACRO _busy_intervals(run) AS TABLE
SELECT NULL::VARCHAR AS term, NULL::VARCHAR AS instance_id, NULL::BIGINT AS step, NULL::VARCHAR AS environment,
       NULL::BIGINT AS devices, NULL::BIGINT AS start_ns, NULL::BIGINT AS end_ns
WHERE false;
CREATE OR REPLACE MACRO _pending_work(run) AS TABLE SELECT * FROM _compute_work(run);
-- _compute_busy_src(run): each process's busy time (the length of the union of its own kind of work intervals,
-- as compute_terms.sql defines it) in the four groupings compute_terms reads without sweeping intervals
-- itself: per step (by_step; step NULL: work no step has consumed yet) or for the whole run (step NULL), and
-- per environment or over all of them (all_environments; environment NULL). Swept from the busy islands per
-- step plus the pending work, which have the same union per process and grouping as the work itself.
CREATE OR REPLACE MACRO _compute_busy_src(run) AS TABLE
WITH intervals AS (
    SELECT term, instance_id, devices, step, environment, start_ns, end_ns FROM _busy_intervals(run)
    UNION ALL
    SELECT term, instance_id, devices, step, environment, start_ns, end_ns
    FROM _pending_work(run)
    WHERE role = term AND term <> 'env' AND end_ns > start_ns
),
keyed AS (
    SELECT
        i.term, i.instance_id, i.devices, i.start_ns, i.end_ns, g.by_step, g.all_environments,
        CASE WHEN g.by_step THEN i.step END AS step,
        CASE WHEN NOT g.all_environments THEN i.environment END AS environment
    FROM intervals AS i
    CROSS JOIN (VALUES (true, false), (true, true), (false, false), (false, true)) AS g(by_step, all_environments)
),
-- Gaps and islands, as in compute_terms.sql: each interval adds its part beyond the running max of the
-- earlier intervals' ends.
swept AS (
    SELECT
        *,
        greatest(
            start_ns,
            coalesce(
                max(end_ns) OVER (
                    PARTITION BY term, instance_id, by_step, all_environments, step, environment
                    ORDER BY start_ns, end_ns
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                ),
                start_ns
            )
        ) AS new_from_ns
    FROM keyed
)
SELECT
    term, by_step, all_environments, step, environment, instance_id, max(devices) AS devices,
    sum(greatest(0, end_ns - new_from_ns))::BIGINT AS busy_ns
FROM swept
GROUP BY term, by_step, all_environments, step, environment, instance_id;
CREATE OR REPLACE MACRO _compute_busy(run) AS TABLE SELECT * FROM _compute_busy_src(run);
