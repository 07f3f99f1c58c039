-- Per-step aggregates: what each analysis and page reads, summed per consuming step (NULL: not consumed yet)
-- and environment, plus the one key each figure groups by. A run of any length keeps a few rows per step here,
-- so the analyses read thousands of rows, not millions of rollouts or turns (store/derived.py keeps them on
-- disk, scope "step": a step's rows come from that step's rollouts and turns alone). Counts and token sums are
-- integers, so every figure summed from them equals one summed from the rows directly.
-- Each _<name>_src(run) is the definition over the per-rollout and per-turn tables; _<name>(run) is what the
-- analyses read (a reader points it at the store's derived table).

-- _funnel_sums_src(run): rollouts per step, environment, task and funnel outcome (the stage flags of
-- rollout_stages, scored-in-groups, the stage lost at and why, as funnel_losses.sql names it), and the tokens
-- they decoded (the advisor's infrastructure lever).
CREATE OR REPLACE MACRO _funnel_sums_src(run) AS TABLE
SELECT
    s.step, s.environment, s.task_id AS task, s.completed, s.scored, s.nonzero_signal, s.fresh, s.usable,
    s.scored AND s.group_scored >= 2 AS in_groups,
    s.lost_at,
    CASE
        WHEN s.lost_reason = 'group too small' AND s.group_id IS NULL THEN 'no group_id'
        WHEN s.lost_reason = 'group too small' THEN 'only scored attempt in its group'
        ELSE s.lost_reason
    END AS reason,
    count(*) AS rollouts,
    sum(coalesce(w.generated, 0))::BIGINT AS generated
FROM rollout_stages(run) AS s
LEFT JOIN _rollout_work(run) AS w USING (rollout_id)
GROUP BY ALL;
CREATE OR REPLACE MACRO _funnel_sums(run) AS TABLE SELECT * FROM _funnel_sums_src(run);

-- _staleness_sums_src(run): rollouts per step, environment, staleness, trainer decision, the run's bound and
-- whether they carried a signal (the advisor's staleness lever counts those).
CREATE OR REPLACE MACRO _staleness_sums_src(run) AS TABLE
SELECT step, environment, staleness, decision, staleness_bound AS bound, nonzero_signal, count(*) AS samples
FROM rollout_stages(run)
GROUP BY ALL;
CREATE OR REPLACE MACRO _staleness_sums(run) AS TABLE SELECT * FROM _staleness_sums_src(run);

-- _rollout_sums_src(run): the per-rollout work (_rollout_work) summed per step, environment, whether the
-- rollout is known (its rl.rollout span arrived) and usable: token_work.sql's sums, throughput.sql's window,
-- tokens and tool time, disaggregation.sql's turns per rollout. FLOPs stay integers.
CREATE OR REPLACE MACRO _rollout_sums_src(run) AS TABLE
SELECT
    step, environment, known, usable,
    count(*) AS rollouts,
    -- one step's token and time sums fit in BIGINT (reads ~3x faster than HUGEINT); FLOPs may not
    sum(coalesce(generated, 0))::BIGINT AS generated,
    sum(coalesce(reprefilled, 0))::BIGINT AS reprefilled,
    sum(coalesce(sample_tokens, trajectory_tokens, 0))::BIGINT AS trained,
    sum(coalesce(teacher_tokens, 0))::BIGINT AS teacher_scored,
    sum(coalesce(generation_flops, 0) + coalesce(teacher_flops, 0) + coalesce(judge_flops, 0)) AS flops,
    count(*) FILTER (turns > 0) AS rollouts_with_turns,
    sum(turns) FILTER (turns > 0)::BIGINT AS turns,
    sum(generated) FILTER (turns > 0)::BIGINT AS generated_with_turns,
    min(first_turn_ns) AS first_turn_ns,
    max(last_turn_ns) AS last_turn_ns,
    sum(tool_ns)::BIGINT AS tool_ns
FROM _rollout_work(run)
GROUP BY ALL;
CREATE OR REPLACE MACRO _rollout_sums(run) AS TABLE SELECT * FROM _rollout_sums_src(run);

-- _rollout_tails_src(run): the per-rollout values throughput.sql takes exact percentiles of, one narrow row per
-- value, stored in step order (a percentile needs every value; this and _turn_latency are the only per-rollout
-- or per-turn rows an analysis reads): the decoded tokens of each known rollout with turns (duration_s NULL)
-- and each rollout's seconds (generated NULL), each with its consuming step and environment.
CREATE OR REPLACE MACRO _rollout_tails_src(run) AS TABLE
SELECT * FROM (
    SELECT step, environment, generated::BIGINT AS generated, NULL::DOUBLE AS duration_s  -- one rollout's
    FROM _rollout_work(run)
    WHERE known AND turns > 0
    UNION ALL
    SELECT c.step, r.environment, NULL, r.duration_s
    FROM rollouts AS r
    LEFT JOIN (SELECT rollout_id, step FROM rollout_steps(run)) AS c USING (rollout_id)
    WHERE r.run_id = run
);
CREATE OR REPLACE MACRO _rollout_tails(run) AS TABLE SELECT * FROM _rollout_tails_src(run);

-- _turn_latency_src(run): each turn's seconds (one narrow row per turn, stored in step order), for the median turn
-- latency of disaggregation.sql, an exact percentile that needs every value.
CREATE OR REPLACE MACRO _turn_latency_src(run) AS TABLE
SELECT step, environment, duration_s
FROM _turns_stepped(run);
CREATE OR REPLACE MACRO _turn_latency(run) AS TABLE SELECT * FROM _turn_latency_src(run);

-- _prefill_sums_src(run): the turns' tokens and times per step and environment (per_turn_index false) and per
-- step, environment and turn index (per_turn_index true), with the largest model: prefill_decode.sql,
-- disaggregation.sql and the advisor's prefix-reuse and disaggregation levers. Summed from the turn sums
-- (macros/06), which hold the same integer sums at a finer key; one step's sums fit in BIGINT, which reads twice
-- as fast as the DECIMAL(38, 0) a HUGEINT sum is stored as.
CREATE OR REPLACE MACRO _prefill_sums_src(run) AS TABLE
SELECT
    t.step, t.environment, CASE WHEN g.per_turn_index THEN t.turn_index END AS turn_index, g.per_turn_index,
    sum(t.turns)::BIGINT AS turns,
    sum(t.new_prefill_tokens)::BIGINT AS new_prefill_tokens,
    sum(t.cached_prefill_tokens)::BIGINT AS cached_prefill_tokens,
    sum(t.input_tokens)::BIGINT AS input_tokens,
    sum(t.decode_tokens)::BIGINT AS decode_tokens,
    sum(t.reprefill_waste_tokens)::BIGINT AS reprefill_waste_tokens,
    sum(t.prefill_ns)::BIGINT AS prefill_ns,
    sum(t.decode_ns)::BIGINT AS decode_ns,
    max(t.model_parameters) AS model_parameters
FROM _turn_sums(run) AS t CROSS JOIN (VALUES (false), (true)) AS g(per_turn_index)
GROUP BY ALL;
CREATE OR REPLACE MACRO _prefill_sums(run) AS TABLE SELECT * FROM _prefill_sums_src(run);

-- _spec_sums_src(run): the turns that drafted, summed per step, environment, speculative budget k and one more
-- key (grouped_by: 'none', 'policy_version', 'drafter_version', 'versions_since_refresh', 'length_bucket'; and
-- 'drift': drafter and policy version together): spec_decode.sql and spec_drift.sql.
CREATE OR REPLACE MACRO _spec_sums_src(run) AS TABLE
SELECT
    CASE
        WHEN GROUPING(policy_version, drafter_version, versions_since_refresh, length_bucket) = 15 THEN 'none'
        WHEN GROUPING(policy_version, drafter_version) = 0 THEN 'drift'
        WHEN GROUPING(policy_version) = 0 THEN 'policy_version'
        WHEN GROUPING(drafter_version) = 0 THEN 'drafter_version'
        WHEN GROUPING(versions_since_refresh) = 0 THEN 'versions_since_refresh'
        ELSE 'length_bucket'
    END AS grouped_by,
    step, environment, spec_k, policy_version, drafter_version, versions_since_refresh, length_bucket,
    sum(spec_turns)::BIGINT AS spec_turns,  -- one step's counts: BIGINT, which reads ~3x faster than HUGEINT
    sum(drafted)::BIGINT AS drafted,
    sum(accepted)::BIGINT AS accepted,
    sum(verify_steps)::BIGINT AS verify_steps
FROM (
    SELECT *, policy_version - drafter_policy_version AS versions_since_refresh
    FROM _turn_sums(run)
    WHERE spec_turns > 0
)
GROUP BY GROUPING SETS (
    (step, environment, spec_k),
    (step, environment, spec_k, policy_version),
    (step, environment, spec_k, drafter_version),
    (step, environment, spec_k, versions_since_refresh),
    (step, environment, spec_k, length_bucket),
    (step, environment, spec_k, drafter_version, policy_version)
);
CREATE OR REPLACE MACRO _spec_sums(run) AS TABLE SELECT * FROM _spec_sums_src(run);

-- _lint_sums_src(run): turns whose log-probabilities came from the drafter, per step, policy version and
-- environment (logprob_lint.sql's groups), with their rollouts and first and last times.
CREATE OR REPLACE MACRO _lint_sums_src(run) AS TABLE
SELECT
    step, policy_version, environment,
    count(*) AS turns,
    count(DISTINCT rollout_id) AS rollouts,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen
FROM _turns_stepped(run)
WHERE logprobs_source = 'drafter'
GROUP BY ALL;
CREATE OR REPLACE MACRO _lint_sums(run) AS TABLE SELECT * FROM _lint_sums_src(run);

-- _generation_sums_src(run): consumed rollouts with turns per step and environment, their decoded tokens and
-- how many were clipped at a length limit (their last turn cut off by the response limit or the context length:
-- generations_by_step.sql); how many each limit cut off (docs/metrics.md, "Truncation": the rollout's own limit, a
-- turn or tool budget, else its last turn's), the largest response limit their turns asked for and the longest
-- single response (truncation_by_step.sql).
CREATE OR REPLACE MACRO _generation_sums_src(run) AS TABLE
WITH per_rollout AS (
    SELECT
        rollout_id,
        sum(output_tokens) AS output_tokens,
        max(output_tokens) AS longest_response,
        max(max_tokens) AS max_tokens,
        -- arg_max skips a NULL argument: '' stands for "not cut off" so the last turn's is always taken
        nullif(arg_max(coalesce(truncation_limit, ''), coalesce(turn_index, 0)), '') AS last_turn_limit
    FROM turns
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id
),
limited AS (
    SELECT p.*, coalesce(r.truncation_limit, p.last_turn_limit) AS cut_by
    FROM per_rollout AS p
    LEFT JOIN (SELECT rollout_id, truncation_limit FROM rollouts WHERE run_id = run) AS r USING (rollout_id)
)
SELECT
    c.step, c.environment,
    count(*) AS rollouts,
    count(p.output_tokens) AS rollouts_with_tokens,
    sum(p.output_tokens)::BIGINT AS output_tokens,
    count(*) FILTER (p.last_turn_limit IN ('response', 'context')) AS clipped,
    count(*) FILTER (p.cut_by = 'response') AS cut_response,
    count(*) FILTER (p.cut_by = 'context') AS cut_context,
    count(*) FILTER (p.cut_by = 'turns') AS cut_turns,
    count(*) FILTER (p.cut_by = 'tools') AS cut_tools,
    max(p.max_tokens) AS max_tokens,
    max(p.longest_response) AS longest_response
FROM rollout_steps(run) AS c
JOIN limited AS p USING (rollout_id)
WHERE c.step IS NOT NULL
GROUP BY ALL;
CREATE OR REPLACE MACRO _generation_sums(run) AS TABLE SELECT * FROM _generation_sums_src(run);

-- _reward_sums_src(run): scores per consuming step, environment and scoring function: each verifier's (rl.reward
-- spans, kind 'verifier', by reward_name: rewards_by_step.sql) and each judge's (rl.judge spans, kind 'judge', by
-- the judge model asked, else 'judge'): how many scored, their sum and the sum of their magnitudes (the reward
-- detectors, docs/metrics.md "Detectors"). Rollouts that ended infra_error or aborted are left out: an
-- infrastructure abort is no reward, whatever a scorer wrote for it (docs/metrics.md, "Truncation").
CREATE OR REPLACE MACRO _reward_sums_src(run) AS TABLE
WITH scores AS (
    SELECT rollout_id, 'verifier' AS kind, reward_name, reward FROM rewards WHERE run_id = run
    UNION ALL
    SELECT rollout_id, 'judge', coalesce(request_model, 'judge'), reward FROM judges WHERE run_id = run
)
SELECT
    r.step, r.environment, w.kind, w.reward_name,
    count(w.reward) AS scored,
    sum(w.reward) AS reward_sum,
    sum(abs(w.reward)) AS reward_abs_sum
FROM rollout_steps(run) AS r
JOIN scores AS w USING (rollout_id)
WHERE r.step IS NOT NULL AND coalesce(r.rollout_status, 'ok') NOT IN ('infra_error', 'aborted')
GROUP BY ALL;
CREATE OR REPLACE MACRO _reward_sums(run) AS TABLE SELECT * FROM _reward_sums_src(run);

