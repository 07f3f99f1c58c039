-- Each piece's traces written to one file ($target), sorted by piece, which each piece reads its own from
-- (piece_traces.sql) in small row groups.
COPY (SELECT piece, trace_id FROM _piece_traces ORDER BY piece) TO $target (FORMAT parquet, ROW_GROUP_SIZE 16384);
