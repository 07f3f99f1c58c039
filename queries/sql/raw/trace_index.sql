-- _trace_index(run): per trace and rollout id its spans carry (NULL: none), the rollout's group (from its
-- rl.rollout span) and the first start and last end of those spans: the index an incremental catch-up finds
-- a scoped trace's spans with (queries/catch_up.py; kept as the derived index _traces).
CREATE OR REPLACE MACRO _trace_index(run) AS TABLE
SELECT
    trace_id, rollout_id, max(group_id) FILTER (name = 'rl.rollout') AS group_id,
    min(start_ns) AS lo_ns, max(end_ns) AS hi_ns
FROM raw_spans
WHERE run_id = run
GROUP BY trace_id, rollout_id;
