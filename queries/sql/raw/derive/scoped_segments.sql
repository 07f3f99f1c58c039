-- The segments a scope's spans are read from: those whose time range (_ranges) meets a scoped trace's (its
-- index rows' first start and last end), and the first start and last end over the scoped traces.
WITH traces AS (
    SELECT trace_id, min(lo_ns) AS lo, max(hi_ns) AS hi
    FROM _idx SEMI JOIN _scope_traces USING (trace_id)
    GROUP BY trace_id
)
SELECT
    (SELECT list(DISTINCT r.segment) FROM _ranges AS r JOIN traces AS t ON r.lo_ns <= t.hi AND r.hi_ns >= t.lo)
        AS segments,
    min(lo) AS lo,
    max(hi) AS hi
FROM traces;
