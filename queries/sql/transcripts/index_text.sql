-- The text search.sql searches (a message's content, reasoning and tool calls, as the messages view reads them),
-- lowercased, for the rows of _index_rows (row groups of one messages segment, read by store/text_index.py's
-- read_groups, in file order). What the trigram sidecars (queries/text_index.py) are built from: it must stay
-- the text search.sql's `said` builds.
SELECT lower(concat_ws(chr(10), content, reasoning, tool_calls::JSON::VARCHAR)) AS text
FROM _index_rows
