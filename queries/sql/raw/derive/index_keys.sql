-- The trace index's keys of the index rows @rows, into @target: each rollout and group id with a trace whose
-- rows name it (a pair may repeat: a lookup takes the distinct traces, and the parts' merges the distinct
-- pairs). Not a temporary table: a full derivation's plan writes it from another cursor.
CREATE OR REPLACE TABLE @target AS
SELECT rollout_id AS key, trace_id FROM @rows WHERE rollout_id IS NOT NULL
UNION ALL
SELECT group_id AS key, trace_id FROM @rows WHERE group_id IS NOT NULL;
