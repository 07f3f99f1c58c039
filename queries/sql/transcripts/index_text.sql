-- The text search.sql searches (a message's content, reasoning and tool calls, as the messages view reads them),
-- lowercased, for the rows $lo .. $hi - 1 of one messages segment in file order ($files: the segment and the
-- messages schema file, so a segment written before a column existed reads it as NULL). What the trigram
-- sidecars (queries/text_index.py) are built from: it must stay the text search.sql's `said` builds.
SELECT lower(concat_ws(chr(10), content, reasoning, tool_calls::JSON::VARCHAR)) AS text
FROM read_parquet($files, union_by_name = true, hive_partitioning = false, file_row_number = true)
WHERE file_row_number >= $lo AND file_row_number < $hi
ORDER BY file_row_number
