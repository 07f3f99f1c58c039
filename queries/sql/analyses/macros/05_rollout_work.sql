-- _rollout_work_src(run): the work around each rollout, one row per rollout id: its turns, the tokens they
-- decoded, prefilled new, and prefilled again (context − cached), its final context (the largest input +
-- output of a turn) and its trajectory's tokens (below), first turn start and last turn end, generation FLOPs
-- (2·P·(new prefill + decode)), the tokens a teacher scored and the teacher's FLOPs, judge FLOPs, and nanoseconds in tool / sandbox calls.
-- Sums are integers, so the stored sums are exact.
-- token_work.sql, throughput.sql and disaggregation.sql read it (below, with the rollout's stage) instead of
-- grouping millions of turns.
CREATE OR REPLACE MACRO _rollout_work_src(run) AS TABLE
WITH generation AS (
    SELECT
        rollout_id,
        count(*) AS turns,
        sum(output_tokens) AS generated,
        sum(new_input_tokens) AS new_prefill,
        sum(greatest(0, coalesce(context_tokens, 0) - coalesce(cached_input_tokens, 0))) AS reprefilled,
        max(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS final_context,
        -- what a trainer that records no rl.sample trains on: the last turn's context, plus the history each
        -- compaction replaced (the samples it ended)
        arg_max(coalesce(input_tokens, 0) + coalesce(output_tokens, 0), end_ns)
            + coalesce(sum(compaction_tokens_before), 0) AS trajectory_tokens,
        min(start_ns) AS first_turn_ns,
        max(end_ns) AS last_turn_ns,
        2 * sum(model_parameters::HUGEINT * (coalesce(new_input_tokens, 0) + coalesce(output_tokens, 0)))
            AS generation_flops
    FROM turns
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id
),
teacher AS (
    SELECT
        rollout_id,
        sum(teacher_tokens) AS teacher_tokens,
        2 * sum(parameters::HUGEINT * coalesce(teacher_tokens, 0)) AS teacher_flops
    FROM teachers
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id
),
judge AS (
    SELECT
        rollout_id,
        2 * sum(parameters::HUGEINT * (coalesce(input_tokens, 0) + coalesce(output_tokens, 0))) AS judge_flops
    FROM judges
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id
),
tool AS (
    SELECT rollout_id, sum(end_ns - start_ns) AS tool_ns
    FROM tools
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id
)
SELECT
    rollout_id, coalesce(g.turns, 0) AS turns, g.generated, g.new_prefill, g.reprefilled, g.final_context,
    g.trajectory_tokens,
    g.first_turn_ns, g.last_turn_ns, g.generation_flops, x.teacher_tokens, x.teacher_flops, j.judge_flops,
    t.tool_ns
FROM generation AS g
FULL JOIN teacher AS x USING (rollout_id)
FULL JOIN judge AS j USING (rollout_id)
FULL JOIN tool AS t USING (rollout_id);
-- _rollout_work_staged(run): that work next to each known rollout's consuming step, environment, usable flag
-- and sample tokens (rollout_stages), one row per rollout id of either: known is false for work of a rollout
-- whose rl.rollout span has not arrived. Per-rollout figures filtered by step or environment join nothing.
CREATE OR REPLACE MACRO _rollout_work_staged(run) AS TABLE
SELECT
    coalesce(s.rollout_id, w.rollout_id) AS rollout_id, s.rollout_id IS NOT NULL AS known, s.step, s.environment,
    s.usable, s.sample_tokens, w.* EXCLUDE (rollout_id)
FROM _rollout_work_src(run) AS w
FULL JOIN rollout_stages(run) AS s ON s.rollout_id = w.rollout_id;
-- The name the analyses read; a reader reads it from the store's derived table (queries/tables.py).
CREATE OR REPLACE MACRO _rollout_work(run) AS TABLE SELECT * FROM _rollout_work_staged(run);
