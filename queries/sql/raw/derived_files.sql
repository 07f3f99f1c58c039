-- One derived table (queries/tables.py) as the reader sees it: the published Parquet files of the runs it reads
-- (@files, a literal list put in by the reader), or, when no run has any, an empty file typed by its definition.
-- @union_by_name is false when every run's manifest gives the table the same columns and types (the same
-- definitions, as one FORMAT has): binding then reads the first file's schema, not every part's footer (a
-- store of a hundred runs holds thousands of parts); columns are still matched by name. True otherwise.
CREATE OR REPLACE VIEW @table AS
SELECT * FROM read_parquet(@files, union_by_name = @union_by_name, hive_partitioning = false);
