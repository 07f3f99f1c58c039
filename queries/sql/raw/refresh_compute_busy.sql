-- compute_busy after new spans (queries/refresh.py). Per step (by_step) its rows of the scoped steps and of
-- the pending work (step NULL) are swept again from those steps' islands; the others stand. For the whole run
-- (NOT by_step) a process's busy time is the length of the union of all its intervals: the intervals that
-- changed (the previous and the new islands of the scoped steps, the previous and the new pending work) all
-- start at $t0_ns or later, so the union before $t0_ns is unchanged, and
--     busy = previous busy − previous union from $t0_ns on + new union from $t0_ns on,
-- each union taken by _compute_busy_src over the intervals clipped to [$t0_ns, ∞). A key keeps a row while
-- any interval is left (every interval has a positive length). Reads the previous and the new parts
-- (_old_step_islands, _old_work, _old_compute_busy; _final_step_islands, _final_work) and points the views
-- _compute_busy_src reads (_step_islands_mat, _work_mat) at each interval set in turn. The table is kept in
-- blocks of steps (the whole-run rows and step NULL in block p), so a catch-up rewrites the scoped steps' blocks.
CREATE OR REPLACE TEMP TABLE _islands AS
SELECT * FROM _final_step_islands WHERE step IN (SELECT step FROM _scope_steps);
CREATE OR REPLACE TEMP TABLE _pending AS SELECT * FROM _final_work WHERE step IS NULL;
CREATE OR REPLACE VIEW _step_islands_mat AS SELECT * FROM _islands;
CREATE OR REPLACE VIEW _work_mat AS SELECT * FROM _pending;
CREATE OR REPLACE TEMP TABLE _busy_steps AS SELECT * FROM _compute_busy_src($run) WHERE by_step;
-- The new union from $t0_ns on.
CREATE OR REPLACE TEMP TABLE _islands AS
SELECT * REPLACE (greatest(start_ns, $t0_ns) AS start_ns) FROM _final_step_islands WHERE end_ns > $t0_ns;
CREATE OR REPLACE TEMP TABLE _pending AS
SELECT * REPLACE (greatest(start_ns, $t0_ns) AS start_ns) FROM _final_work WHERE step IS NULL AND end_ns > $t0_ns;
CREATE OR REPLACE TEMP TABLE _tail_new AS SELECT * FROM _compute_busy_src($run) WHERE NOT by_step;
-- The previous union from $t0_ns on.
CREATE OR REPLACE TEMP TABLE _islands AS
SELECT * REPLACE (greatest(start_ns, $t0_ns) AS start_ns) FROM _old_step_islands WHERE end_ns > $t0_ns;
CREATE OR REPLACE TEMP TABLE _pending AS
SELECT * REPLACE (greatest(start_ns, $t0_ns) AS start_ns) FROM _old_work WHERE step IS NULL AND end_ns > $t0_ns;
CREATE OR REPLACE TEMP TABLE _tail_old AS SELECT * FROM _compute_busy_src($run) WHERE NOT by_step;
-- The rows that change (derive.py keeps the previous per-step rows of the other steps, block by block).
CREATE OR REPLACE TEMP TABLE _merged AS
SELECT $run AS run_id, * FROM _busy_steps
UNION ALL BY NAME
SELECT
    $run AS run_id, term, false AS by_step, all_environments, NULL::BIGINT AS step, environment, instance_id,
    max(devices) AS devices, sum(sign * busy_ns)::BIGINT AS busy_ns
FROM (
    SELECT *, 1 AS sign FROM _old_compute_busy WHERE NOT by_step
    UNION ALL BY NAME
    SELECT *, -1 AS sign FROM _tail_old
    UNION ALL BY NAME
    SELECT *, 1 AS sign FROM _tail_new
)
GROUP BY term, all_environments, environment, instance_id
HAVING sum(sign * busy_ns) > 0;
