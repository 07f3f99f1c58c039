-- Non-materialized readers: the raw view reads the current segment list (a variable set by the reader).
CREATE OR REPLACE VIEW raw_spans AS
SELECT * FROM read_parquet(getvariable('rollscope_spans_files'),
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'});
CREATE OR REPLACE VIEW raw_collector_stats AS
SELECT * FROM read_parquet(getvariable('rollscope_collector_stats_files'),
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'});
