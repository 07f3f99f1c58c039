-- The traces holding spans of no rollout whose rows a full derivation's pending piece derives
-- (queries/pieces.py, plan_pieces.sql): a generation, tool call, scoring or teacher span without
-- rl.rollout.id counts at no step. Not the train steps and weight syncs (every piece reads them all), nor an
-- inference engine's request under an rl.turn, which fills its turn's columns and is no row of its own (the
-- engine_candidates of views/03_turns.sql, less tool calls): in a run whose turns send their traceparent to
-- the engine, every turn's trace holds one, and the pending piece would read the whole run.
CREATE OR REPLACE TEMP TABLE _loose AS
SELECT
    trace_id,
    CASE
        WHEN name NOT IN ('rl.turn', 'rl.judge', 'rl.teacher') AND name NOT LIKE 'execute_tool%'
             AND operation_name IS DISTINCT FROM 'execute_tool'
             AND (name = 'llm_request' OR operation_name IN ('chat', 'text_completion', 'generate_content')
                  OR prefill_time_s IS NOT NULL OR decode_time_s IS NOT NULL OR ttft_s IS NOT NULL)
        THEN parent_span_id
    END AS engine_parent
FROM raw_spans
WHERE run_id = $run AND rollout_id IS NULL AND name NOT IN ('rl.train_step', 'rl.weight_sync');
CREATE OR REPLACE TEMP TABLE _loose_traces AS
SELECT DISTINCT l.trace_id
FROM _loose AS l
ANTI JOIN (
    SELECT trace_id, span_id FROM raw_spans
    WHERE run_id = $run AND name = 'rl.turn' AND trace_id IN (SELECT trace_id FROM _loose)
) AS t ON t.trace_id = l.trace_id AND t.span_id = l.engine_parent;
