-- The trace index's rows of @rows merged into @target, one per trace and rollout (a later part's supersede an
-- earlier one's, the new spans' the parts'): its group, the first start and the last end.
CREATE OR REPLACE TEMP TABLE @target AS
SELECT trace_id, rollout_id, max(group_id) AS group_id, min(lo_ns) AS lo_ns, max(hi_ns) AS hi_ns
FROM @rows
GROUP BY trace_id, rollout_id;
