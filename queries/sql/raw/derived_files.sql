-- One derived table (store/derived.py) as the reader sees it: the published Parquet files of the runs it reads
-- (@files, a literal list put in by the reader), or, when no run has any, an empty file typed by its definition.
CREATE OR REPLACE VIEW @table AS
SELECT * FROM read_parquet(@files, union_by_name = true, hive_partitioning = false);
