-- rollout_goodput after new spans, recomputed from $from_ns on (queries/refresh.py). Its rows are per step window
-- and process; the new spans (turns, rollouts, train steps, weight syncs) start at $t0_ns or later, and
-- $from_ns is the start of the previous state's window holding $t0_ns, or holding a process's previous last
-- end when that process runs again and the end is earlier (its idle time since then counts now): every
-- window that starts earlier keeps its start, end, syncs, spans and processes' bounds, so its previous rows
-- stand (derive.py keeps them). A window starts at its step's first row (a data-parallel trainer records a
-- step once per process): _old_step_starts.
-- The windows from $from_ns on, and the time outside every window (step NULL: before the first window, which
-- starts at $first_ns, and after the last), are swept again by _rollout_goodput_src over the turns, rollouts
-- and weight syncs that overlap them, plus two empty turns per process at its first start and last end
-- (_proc_bounds, kept in the manifest and merged by derive.py: the sweep spans the process's whole time, its
-- devices, as over every span). The sweep sees only the first window and those from $from_ns on (train_steps
-- narrowed to them, _window_steps): the earlier windows' time falls into the first one, whose rows are
-- thrown away, so the sweep costs what the new windows hold, not every window of the run.
-- Each filter is a range on one column (no OR across columns), so the Parquet scans of the turns and
-- rollouts skip the row groups of earlier steps.
CREATE OR REPLACE TEMP TABLE _window_spans AS
SELECT * FROM read_parquet(@schema, hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'})
UNION ALL BY NAME
SELECT run_id, name, start_ns, end_ns, instance_id, devices FROM _turns_mat
WHERE name = 'rl.turn' AND end_ns >= $from_ns
UNION ALL BY NAME
SELECT run_id, name, start_ns, end_ns, instance_id, devices FROM _turns_mat
WHERE name = 'rl.turn' AND start_ns < $first_ns AND NOT coalesce(end_ns >= $from_ns, false)
UNION ALL BY NAME
SELECT run_id, 'rl.rollout' AS name, start_ns, end_ns, instance_id FROM _rollouts_mat
WHERE end_ns >= $from_ns
UNION ALL BY NAME
SELECT run_id, 'rl.rollout' AS name, start_ns, end_ns, instance_id FROM _rollouts_mat
WHERE start_ns < $first_ns AND NOT coalesce(end_ns >= $from_ns, false)
UNION ALL BY NAME
SELECT * FROM _train_spans_mat
WHERE name = 'rl.weight_sync' AND (end_ns >= $from_ns OR start_ns < $first_ns)
UNION ALL BY NAME
SELECT $run AS run_id, 'rl.turn' AS name, b.t AS start_ns, b.t AS end_ns, instance_id, devices
FROM _proc_bounds, unnest([lo, hi]) AS b(t)
WHERE has_turns;
CREATE OR REPLACE TEMP TABLE _window_steps AS  -- every row (one per trainer process) of those windows' steps
SELECT * FROM _train_steps_mat
WHERE train_step IS NULL OR train_step IN (
    SELECT train_step FROM _train_steps_mat WHERE train_step IS NOT NULL GROUP BY train_step
    HAVING min(start_ns) >= $from_ns OR min(start_ns) = $first_ns
);
CREATE OR REPLACE VIEW train_steps AS SELECT * FROM _window_steps;
CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _window_spans;
CREATE OR REPLACE TEMP TABLE _merged AS
SELECT $run AS run_id, * FROM _rollout_goodput_src($run)
WHERE step IS NULL OR step NOT IN (SELECT train_step FROM _old_step_starts WHERE start_ns < $from_ns);
CREATE OR REPLACE VIEW train_steps AS SELECT * FROM _train_steps_mat;
