-- One derived table (store/derived.py) as the reader sees it: the published Parquet files of the runs it reads
-- (@files, a literal list put in by the reader), or, when no run has any, an empty file typed by its definition.
-- @union_by_name is false when every run read recorded the table with the same columns (every part of a
-- published state is written with the columns its manifest records): DuckDB then binds the view from one
-- file's footer rather than reading every part's (40 % of opening a 10M-span run, and of binding each query).
CREATE OR REPLACE VIEW @table AS
SELECT * FROM read_parquet(@files, union_by_name = @union_by_name, hive_partitioning = false);
