-- The raw spans an incremental catch-up derives from (queries/catch_up.py points raw_spans at _scoped and runs
-- derive_full.sql): every span of the scoped traces, read only from the segments whose time range meets a
-- scoped trace's (@files) and within [$lo, $hi]; every train step and weight sync of the run (_train_all);
-- and one placeholder row per run-wide fact a scoped derivation would otherwise miss: the staleness bound
-- (rollout_stages judges freshness against the run's maximum) and, in a run whose trainer records rl.sample
-- spans, one rl.sample of no rollout (rollout_steps reads recorded decisions only in such a run).
CREATE OR REPLACE TABLE _scoped AS
SELECT * FROM read_parquet(@files,
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'})
WHERE run_id = $run AND start_ns <= $hi AND end_ns >= $lo
  AND trace_id IN (SELECT trace_id FROM _scope_traces)
  AND name NOT IN ('rl.train_step', 'rl.weight_sync');
INSERT INTO _scoped BY NAME SELECT * FROM _train_all;
INSERT INTO _scoped BY NAME
SELECT $run AS run_id, 'rollscope.scope' AS name, $bound::BIGINT AS staleness_bound WHERE $bound IS NOT NULL;
INSERT INTO _scoped BY NAME SELECT $run AS run_id, 'rl.sample' AS name, '' AS rollout_id WHERE $samples;
