-- A relation as one part at $target (parquet_parts.write_whole). @order: empty, or the ORDER BY of an index
-- part looked up by key, written in small row groups ($rows) so a lookup reads only its keys' groups.
COPY (SELECT @select FROM @relation @order) TO $target (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE $rows);
