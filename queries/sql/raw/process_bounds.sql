-- Each process's first start and last end over its rl.turn and rl.rollout rows, its devices, and whether it
-- emitted rl.turn spans (_rollout_goodput_src's procs and bounds are those of the processes that did), from the
-- derived turns and rollouts (@turns, @rollouts: the tables or the catch-up's scoped rows of them). Kept in the
-- manifest (meta "process_bounds"), so that a catch-up's rollout_goodput refresh merges the scoped rows'
-- extremes into it (derive.py) rather than scanning every turn and rollout of the run: min, max and bool_or
-- merge exactly, since rows are only ever added or derived again from the same spans.
CREATE OR REPLACE TEMP VIEW _proc_bounds_of AS
SELECT instance_id, min(start_ns) AS lo, max(end_ns) AS hi, max(devices) AS devices, bool_or(turn) AS has_turns
FROM (
    SELECT instance_id, start_ns, end_ns, devices, true AS turn FROM @turns WHERE name = 'rl.turn'
    UNION ALL
    SELECT instance_id, start_ns, end_ns, NULL, false FROM @rollouts
)
WHERE instance_id IS NOT NULL
GROUP BY instance_id;
