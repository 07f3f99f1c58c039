-- _writing's rows as one part per block under $target (<table>/_block=<block>/…, renamed b=<block> after).
-- @select stores each column as Parquet can hold it (derive_db.stored: HUGEINT as DECIMAL(38, 0)).
COPY (SELECT @select, _block FROM _writing) TO $target
    (FORMAT parquet, PARTITION_BY (_block), COMPRESSION zstd, ROW_GROUP_SIZE 122880, OVERWRITE_OR_IGNORE);
