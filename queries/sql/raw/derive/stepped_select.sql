-- A fragment (not run by itself): one blocked table's (step, rollout, trace) in the parts @files, for _stepped;
-- @rollout and @trace are its columns, or NULL where it has none (or is not kept by trace).
SELECT DISTINCT step, @rollout::VARCHAR AS rollout_id, @trace::VARCHAR AS trace_id
FROM read_parquet(@files, hive_partitioning = false)
