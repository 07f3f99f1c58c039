-- The raw views as `rollscope views` prints them for a store kept under key=value folders
-- (`/ckpt/lr=1e-5/runs`), for clients without rollscope. DuckDB reads every key=value folder of a path as a
-- hive partition key, so hive partitioning would give such a store's spans an `lr` column, or replace a
-- column's values where a key has its name (`environment=prod/`). Here run_id comes from each segment's own
-- folder (<dataset>/run_id=<run>/<segment>) and no other folder is read as a key. The reader does not use
-- this: it reads such a store through a link without "=" (reader.hive_path) and keeps DuckDB's pruning of
-- files by run_id; raw_views.sql is the definition for every other store.
CREATE OR REPLACE VIEW raw_spans AS
SELECT * EXCLUDE (_rollscope_file),
    regexp_extract(_rollscope_file, '[/\\]run_id=([^/\\]+)[/\\][^/\\]+$', 1) AS run_id
FROM read_parquet(@spans_files,
    hive_partitioning = false, union_by_name = true, filename = '_rollscope_file');
CREATE OR REPLACE VIEW raw_collector_stats AS
SELECT * EXCLUDE (_rollscope_file),
    regexp_extract(_rollscope_file, '[/\\]run_id=([^/\\]+)[/\\][^/\\]+$', 1) AS run_id
FROM read_parquet(@collector_stats_files,
    hive_partitioning = false, union_by_name = true, filename = '_rollscope_file');
CREATE OR REPLACE VIEW raw_messages AS
SELECT * EXCLUDE (_rollscope_file),
    regexp_extract(_rollscope_file, '[/\\]run_id=([^/\\]+)[/\\][^/\\]+$', 1) AS run_id
FROM read_parquet(@messages_files,
    hive_partitioning = false, union_by_name = true, filename = '_rollscope_file');
