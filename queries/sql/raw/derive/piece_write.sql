-- One part's rows (label $label) of _writing at $target, sorted as a merged part is (@order:
-- parquet_parts.merged_order). @select stores each column as Parquet can hold it.
COPY (SELECT @select FROM _writing WHERE label = $label @order) TO $target
    (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880);
