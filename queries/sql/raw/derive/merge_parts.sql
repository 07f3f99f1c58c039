-- Parquet parts merged into one at $target (parquet_parts.consolidate, pieces' parts several pieces wrote).
-- @order: empty, or the ORDER BY of a merged part (parquet_parts.merged_order: each row group then holds a narrow
-- range of steps, which a query of a step range skips by its statistics); the files as a bound list.
COPY (SELECT * FROM read_parquet($files, hive_partitioning = false, union_by_name = true) @order) TO $target
    (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880);
