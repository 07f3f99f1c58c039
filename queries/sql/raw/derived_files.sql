-- One derived table (store/derived.py) as the reader sees it: the published Parquet files of the runs it reads
-- (@files, a literal list put in by the reader), or, when no run has any, an empty file typed by its definition.
-- @union_by_name is false when every run's manifest gives the table the same columns and types (the same
-- definitions, as one FORMAT has): binding then reads the first file's schema, not every part's footer (a
-- store of a hundred runs holds thousands of parts); columns are still matched by name. True otherwise.
-- @partitioning: for a reader of several runs, each file's run is read from its path (`run_id=<run>/`, hive
-- partitioning, the id kept as text), so a query about one run opens that run's files only: without it, every
-- scan opened every run's parts to read their statistics (a count over one table of a 30M-span run in a store
-- of 100 runs: 35 ms against 8 ms). @columns then names the table's own columns, leaving out the path's other
-- `key=value` parts (`b=<block>/`, and any in the store's own path). A reader of one run, or of files whose
-- paths carry other `=`s, reads them as they are: `hive_partitioning = false` and `*`.
CREATE OR REPLACE VIEW @table AS
SELECT @columns FROM read_parquet(@files, union_by_name = @union_by_name, @partitioning);
