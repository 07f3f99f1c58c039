-- One rollout as a waterfall: its own spans (those carrying its rl.rollout.id: turns, tools, rewards, judges,
-- teachers, the trainer's sample), spans of its trace without a rollout id when the trace holds only this
-- rollout (e.g. vLLM's llm_request), and the train step that consumed it. Times are seconds from the
-- rollout's start. An engine's request span nested under an rl.turn is kind 'other', not a turn.
-- Every read of the raw spans is bounded in time by window.sql ($lo .. $hi, $sample_lo .. $sample_hi), so it
-- reads the row groups of those times and not the run. They are read twice, not once per use: each reference
-- to the spans view binds it over every segment's schema (0.03-0.04 s a reference at 30M spans, the query's
-- largest cost), so one read (nearby) keeps what the uses below share: the rollout's own spans and samples, the
-- rl.rollout spans (does the trace hold only this rollout?) and the train steps; only the rollout-less spans of
-- its trace are read apart, once that trace is known (a window's engine spans of other traces are many).
WITH nearby AS MATERIALIZED (  -- the one read of the raw spans but for the trace's own (below): see the header
    SELECT * FROM spans
    WHERE run_id = $run_id
      AND (start_ns BETWEEN $lo AND $hi OR start_ns BETWEEN $sample_lo AND $sample_hi)
      AND (rollout_id = $rollout_id OR name IN ('rl.rollout', 'rl.train_step'))
),
target AS (
    SELECT trace_id, start_ns FROM nearby
    WHERE name = 'rl.rollout' AND rollout_id = $rollout_id AND start_ns BETWEEN $lo AND $hi
    LIMIT 1
),
own_trace AS (
    SELECT t.trace_id FROM target AS t
    WHERE (SELECT count(*) FROM nearby AS r
           WHERE r.name = 'rl.rollout' AND r.trace_id = t.trace_id AND r.start_ns BETWEEN $lo AND $hi) = 1
),
consumers AS (
    SELECT DISTINCT train_step FROM nearby WHERE name = 'rl.sample' AND rollout_id = $rollout_id
),
members AS (
    SELECT * FROM nearby WHERE rollout_id = $rollout_id AND start_ns BETWEEN $lo AND $hi
    UNION ALL  -- its rl.sample spans outside its own window (those inside are members already)
    SELECT * FROM nearby
    WHERE name = 'rl.sample' AND rollout_id = $rollout_id
      AND start_ns BETWEEN $sample_lo AND $sample_hi AND start_ns NOT BETWEEN $lo AND $hi
    UNION ALL
    SELECT * FROM spans
    WHERE run_id = $run_id AND rollout_id IS NULL AND trace_id IN (SELECT trace_id FROM own_trace)
      AND start_ns BETWEEN $lo AND $hi
    UNION ALL
    SELECT * FROM nearby
    WHERE name = 'rl.train_step' AND train_step IN (SELECT train_step FROM consumers)
      AND start_ns BETWEEN $sample_lo AND $sample_hi
)
SELECT
    CASE
        WHEN m.name = 'rl.rollout' THEN 'rollout'
        WHEN m.name NOT IN ('rl.turn', 'rl.judge', 'rl.teacher')
             AND (m.name = 'llm_request' OR m.operation_name IN ('chat', 'text_completion', 'generate_content')
                  OR m.prefill_time_s IS NOT NULL OR m.decode_time_s IS NOT NULL OR m.ttft_s IS NOT NULL)
             AND m.parent_span_id IN (SELECT span_id FROM members WHERE name = 'rl.turn')
            THEN 'other'  -- an engine's request span under its turn (as in the turns view): not a second turn
        WHEN m.name IN ('rl.turn', 'llm_request') OR m.operation_name IN ('chat', 'text_completion') THEN 'turn'
        WHEN m.name LIKE 'execute_tool%' THEN 'tool'
        WHEN m.name = 'rl.reward' THEN 'reward'
        WHEN m.name = 'rl.judge' THEN 'judge'
        WHEN m.name = 'rl.teacher' THEN 'teacher'
        WHEN m.name = 'rl.sample' THEN 'sample'
        WHEN m.name = 'rl.train_step' THEN 'train_step'
        ELSE 'other'
    END AS kind,
    m.name,
    (m.start_ns - t.start_ns) / 1e9 AS start_s,
    (m.end_ns - t.start_ns) / 1e9 AS end_s,
    m.duration_s,
    m.turn_index, m.input_tokens, m.cached_input_tokens, m.output_tokens,
    m.spec_draft_tokens, m.spec_accepted_tokens,
    m.tool_name, m.tool_exit_code, m.observation_tokens,
    m.reward_name, m.reward, m.judge_status, m.teacher_tokens,
    m.policy_version, m.train_step, m.sample_decision, m.sample_staleness,
    m.status_code, m.service_name, m.span_id, m.parent_span_id
FROM members AS m, target AS t
ORDER BY m.start_ns, m.end_ns DESC, m.name
