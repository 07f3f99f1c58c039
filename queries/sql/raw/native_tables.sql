-- Materialized readers: native copies of the segments; _segment remembers which segment each row came from,
-- so a segment replaced by a compaction can be removed exactly.
CREATE TABLE _spans AS
SELECT *, NULL::INTEGER AS _segment FROM read_parquet(getvariable('rollscope_spans_files'),
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'}) LIMIT 0;
CREATE TABLE _collector_stats AS
SELECT *, NULL::INTEGER AS _segment FROM read_parquet(getvariable('rollscope_collector_stats_files'),
    hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'}) LIMIT 0;
CREATE OR REPLACE VIEW raw_spans AS SELECT * EXCLUDE (_segment) FROM _spans;
CREATE OR REPLACE VIEW raw_collector_stats AS SELECT * EXCLUDE (_segment) FROM _collector_stats;
