-- rollout_goodput after new spans, recomputed from $from_ns on (queries/derive.py). Its rows are per step window
-- and process; the new spans (turns, rollouts, train steps, weight syncs) start at $t0_ns or later, and
-- $from_ns is the start of the previous state's window holding $t0_ns: every window that starts earlier
-- keeps its start, end, syncs and the spans it overlaps, so its previous rows (_old_rollout_goodput) stand.
-- The windows from $from_ns on, and the time outside every window (step NULL: before the first window, which
-- starts at $first_ns, and after the last), are swept again by _rollout_goodput_src over the turns and
-- rollouts that overlap them, plus two empty turns per process at its first start and last end (so the sweep
-- spans the process's whole time, its devices, as over every span).
CREATE OR REPLACE TEMP TABLE _window_spans AS
SELECT * FROM read_parquet(@schema, hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'})
UNION ALL BY NAME
SELECT run_id, name, start_ns, end_ns, instance_id, devices FROM _turns_mat
WHERE name = 'rl.turn' AND (end_ns >= $from_ns OR start_ns < $first_ns)
UNION ALL BY NAME
SELECT run_id, 'rl.rollout' AS name, start_ns, end_ns, instance_id FROM _rollouts_mat
WHERE end_ns >= $from_ns OR start_ns < $first_ns
UNION ALL BY NAME
SELECT * FROM _train_spans_mat
UNION ALL BY NAME
SELECT $run AS run_id, 'rl.turn' AS name, b.t AS start_ns, b.t AS end_ns, instance_id, devices
FROM (
    SELECT instance_id, min(start_ns) AS lo, max(end_ns) AS hi, max(devices) AS devices
    FROM (
        SELECT instance_id, start_ns, end_ns, devices FROM _turns_mat WHERE name = 'rl.turn'
        UNION ALL
        SELECT instance_id, start_ns, end_ns, NULL FROM _rollouts_mat
    )
    WHERE instance_id IN (SELECT instance_id FROM _turns_mat WHERE name = 'rl.turn')
    GROUP BY instance_id
), unnest([lo, hi]) AS b(t);
CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _window_spans;
CREATE OR REPLACE TEMP TABLE _merged AS
WITH old_windows AS (
    SELECT train_step AS step, start_ns FROM _old_train_steps WHERE train_step IS NOT NULL
)
SELECT * FROM _old_rollout_goodput
WHERE step IN (SELECT step FROM old_windows WHERE start_ns < $from_ns)
UNION ALL BY NAME
SELECT $run AS run_id, * FROM _rollout_goodput_src($run)
WHERE step IS NULL OR step NOT IN (SELECT step FROM old_windows WHERE start_ns < $from_ns);
