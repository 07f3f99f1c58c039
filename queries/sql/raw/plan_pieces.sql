-- The spans each piece of a full derivation reads (queries/pieces.py), as an incremental catch-up's scope reads
-- a scoped step's (scope.sql): the traces of the rollouts its blocks consumed (_block_piece: each block's piece;
-- $pending: the piece of the rollouts no step has consumed, block p) and of every member of their groups, so
-- that a step's rows come from all of its rollouts, each judged with its whole group. The pending piece also
-- reads the rollouts whose rl.rollout span has not arrived (rollouts in flight) and every trace with spans of no
-- rollout (_loose_traces): their rows belong to no step. Reads the plan's tables: _rollouts_mat,
-- _rollout_steps_mat, _traces_mat (the trace index), _ranges (each segment's time range).
CREATE OR REPLACE TEMP TABLE _rollout_piece AS
SELECT s.rollout_id, coalesce(b.piece, $pending) AS piece
FROM (SELECT rollout_id, any_value(step) AS step FROM _rollout_steps_mat GROUP BY rollout_id) AS s
LEFT JOIN _block_piece AS b ON b.block = CAST(floor(s.step / $block_steps) AS BIGINT)
UNION ALL
SELECT rollout_id, $pending FROM (
    SELECT DISTINCT rollout_id FROM _traces_mat WHERE rollout_id IS NOT NULL
    EXCEPT
    SELECT rollout_id FROM _rollouts_mat
);
CREATE OR REPLACE TEMP TABLE _piece_groups AS
SELECT DISTINCT p.piece, r.group_id
FROM _rollout_piece AS p
JOIN _rollouts_mat AS r USING (rollout_id)
WHERE r.group_id IS NOT NULL;
CREATE OR REPLACE TEMP TABLE _piece_traces AS
SELECT DISTINCT p.piece, t.trace_id
FROM (
    SELECT piece, rollout_id FROM _rollout_piece
    UNION
    SELECT g.piece, r.rollout_id FROM _piece_groups AS g JOIN _rollouts_mat AS r USING (group_id)
) AS p
JOIN _traces_mat AS t USING (rollout_id)
UNION
SELECT $pending, trace_id FROM _loose_traces;
-- Each piece's traces' time range, and the segments that meet one of its traces' ranges.
CREATE OR REPLACE TEMP TABLE _piece_ranges AS
SELECT p.piece, t.trace_id, min(t.lo_ns) AS lo_ns, max(t.hi_ns) AS hi_ns
FROM _piece_traces AS p
JOIN _traces_mat AS t USING (trace_id)
GROUP BY p.piece, t.trace_id;
WITH spans AS (
    SELECT piece, min(lo_ns) AS lo_ns, max(hi_ns) AS hi_ns, count(*) AS traces FROM _piece_ranges GROUP BY piece
),
met AS (
    SELECT q.piece, list(DISTINCT g.segment ORDER BY g.segment) AS segments
    FROM _piece_ranges AS q
    JOIN _ranges AS g ON g.lo_ns <= q.hi_ns AND g.hi_ns >= q.lo_ns
    GROUP BY q.piece
)
SELECT * FROM spans LEFT JOIN met USING (piece) ORDER BY piece;
