-- The previous index rows of the traces $traces (read by trace into _found) added to _idx, which a pass of
-- scope.sql reads as if it were the whole index (catch_up._Index).
INSERT INTO _idx SELECT trace_id, rollout_id, group_id, lo_ns, hi_ns FROM _found
WHERE trace_id IN (SELECT unnest($traces));
