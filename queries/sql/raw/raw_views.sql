-- The raw views: the run's (or store's) live segments, read lazily with filter pushdown. The reader puts the
-- list of files in place of each read_parquet's @-placeholder below (a literal list, so every cursor of the
-- connection shares the views) and recreates them when segments are published or compacted.
CREATE OR REPLACE VIEW raw_spans AS
SELECT * FROM read_parquet(@spans_files,
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'});
CREATE OR REPLACE VIEW raw_collector_stats AS
SELECT * FROM read_parquet(@collector_stats_files,
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'});
CREATE OR REPLACE VIEW raw_messages AS
SELECT * FROM read_parquet(@messages_files,
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'});
