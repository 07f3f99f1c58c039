-- The messages an incremental catch-up derives the transcript flags from (queries/catch_up.py points raw_messages at
-- _scoped_messages): the run's messages of the scoped traces, read from the row groups whose start_ns range meets
-- [$lo, $hi] (a message starts with its span, and every scoped trace's spans start in that range).
CREATE OR REPLACE TABLE _scoped_messages AS
SELECT * FROM read_parquet(@files,
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'})
WHERE run_id = $run AND start_ns BETWEEN $lo AND $hi
  AND trace_id IN (SELECT trace_id FROM _scope_traces);
