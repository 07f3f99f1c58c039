-- The traces of piece $piece, from the plan's file of every piece's traces ($traces), whose spans it reads
-- (scope_spans.sql).
CREATE OR REPLACE TABLE _scope_traces AS SELECT trace_id FROM read_parquet($traces) WHERE piece = $piece;
