-- Repeated prefill by remedy (docs/metrics.md): each turn's prompt split by what would have spared its prefill,
-- kept per consuming step, environment and turn index like _prefill_sums (macros/07), so prefill_split.sql and
-- the advisor's prefix_continuity, prompt_sharing and compaction levers read a few rows per step.

-- _continuity_reason(compacted, recorded, prefix_tokens, context_tokens): why a turn prefilled history again
-- (docs/semconv.md, "Prefix continuity"): compacted on a turn that records a compaction, else the reason the
-- job recorded (rl.turn.continuity_break), else retokenized where the exact prefix is shorter than the history,
-- else unattributed. The Rollouts page's marks (rollout_trace/continuity.sql) use it too.
CREATE OR REPLACE MACRO _continuity_reason(compacted, recorded, prefix_tokens, context_tokens) AS
    CASE
        WHEN compacted THEN 'compacted'
        WHEN recorded IN ('retokenized', 'evicted', 'server_changed', 'compacted') THEN recorded
        WHEN prefix_tokens < context_tokens THEN 'retokenized'
        ELSE 'unattributed'
    END;

-- _history_reprefill(input_tokens, cached_input_tokens, context_tokens): the history a turn prefilled again:
-- context − cached (re-prefill waste, docs/metrics.md), within what it prefilled (its uncached input).
CREATE OR REPLACE MACRO _history_reprefill(input_tokens, cached_input_tokens, context_tokens) AS
    least(
        greatest(0, coalesce(context_tokens, 0) - coalesce(cached_input_tokens, 0)),
        coalesce(input_tokens, 0) - least(coalesce(cached_input_tokens, 0), coalesce(input_tokens, 0))
    );

-- _prefill_split_src(run): per turn, input_tokens = cached (from the cache: history, or the group's task prompt
-- on a first turn) + history prefilled again (context − cached, up to the prompt's uncached rest; by reason) +
-- the task prompt prefilled again (a first turn's prompt less its cached part, for every member of a group but
-- the one that prefilled the most: it had to; not on a first turn whose engine reported no cached count, which
-- may well have shared it: vLLM's n samples of one prompt do) + new (the rest); and the compaction a turn starts from (history
-- before − after removed, after trained on again by the sample it starts: compaction_trained_tokens, of the
-- usable rollouts the trainer trains on). For the compaction what-if, per turn
-- of a rollout that compacted, cut = the tokens removed so far: a later turn would have prefilled them again in
-- the share it prefilled its own history again (avoided = cut × again / context, rounded); a compacted turn
-- would have read its history plus cut (compaction_history_tokens), prefilled again in the share the
-- environment's other later turns of the step did (history_reprefill_tokens / history_tokens). Summed per step
-- and environment (per_turn_index false) and per step, environment and turn index (true). Integer sums: a
-- reader's incremental sums equal a fresh derivation's.
CREATE OR REPLACE MACRO _prefill_split_src(run) AS TABLE
WITH t AS (
    SELECT
        step, environment, turn_index, rollout_id, group_id, start_ns, prefill_time_s,
        coalesce(input_tokens, 0) AS input,
        least(coalesce(cached_input_tokens, 0), coalesce(input_tokens, 0)) AS served,
        _history_reprefill(input_tokens, cached_input_tokens, context_tokens) AS again,
        coalesce(context_tokens, 0) AS context,
        compaction_tokens_before IS NOT NULL AS compacted,
        greatest(0, coalesce(compaction_tokens_before, 0) - coalesce(compaction_tokens_after, 0)) AS removed,
        coalesce(compaction_tokens_after, 0) AS compaction_after,
        coalesce(s.usable, false) AS usable,
        _continuity_reason(compaction_tokens_before IS NOT NULL, continuity_break, prefix_tokens, context_tokens)
            AS reason,
        CASE WHEN turn_index = 0 AND group_id IS NOT NULL AND cached_input_tokens IS NOT NULL THEN
            greatest(0, least(coalesce(task_prompt_tokens, input_tokens), input_tokens)
                        - least(coalesce(cached_input_tokens, 0), input_tokens))
        END AS own_prompt
    FROM _turns_stepped(run) AS t
    LEFT JOIN (SELECT rollout_id, usable FROM rollout_stages(run)) AS s USING (rollout_id)
),
compacting AS (SELECT DISTINCT rollout_id FROM t WHERE compacted),
cut AS (  -- the tokens compaction removed so far, on the turns of the (few) rollouts that compacted
    SELECT * EXCLUDE (own_prompt), 0 AS prompt_again, 0 AS cut FROM t
    ANTI JOIN compacting USING (rollout_id)
    WHERE own_prompt IS NULL
    UNION ALL
    SELECT
        * EXCLUDE (own_prompt), 0 AS prompt_again,
        sum(removed) OVER (PARTITION BY rollout_id ORDER BY turn_index ROWS UNBOUNDED PRECEDING) AS cut
    FROM t SEMI JOIN compacting USING (rollout_id)
    WHERE own_prompt IS NULL
    UNION ALL  -- first turns of a group's members (a compaction never precedes a first turn)
    SELECT
        * EXCLUDE (own_prompt),
        CASE
            WHEN row_number() OVER (PARTITION BY group_id ORDER BY own_prompt DESC, start_ns, rollout_id) > 1
            THEN own_prompt ELSE 0
        END AS prompt_again,
        0 AS cut
    FROM t
    WHERE own_prompt IS NOT NULL
)
SELECT
    c.step, c.environment, CASE WHEN g.per_turn_index THEN c.turn_index END AS turn_index, g.per_turn_index,
    count(*) AS turns,
    -- one step's sums per key fit in BIGINT, which reads faster than the HUGEINT sum() gives
    sum(c.input)::BIGINT AS input_tokens,
    sum(c.served)::BIGINT AS cached_tokens,
    sum(c.input - c.served - c.again - c.prompt_again)::BIGINT AS new_tokens,
    sum(c.again) FILTER (c.reason = 'retokenized')::BIGINT AS reprefill_retokenized_tokens,
    sum(c.again) FILTER (c.reason = 'evicted')::BIGINT AS reprefill_evicted_tokens,
    sum(c.again) FILTER (c.reason = 'server_changed')::BIGINT AS reprefill_server_changed_tokens,
    sum(c.again) FILTER (c.reason = 'compacted')::BIGINT AS reprefill_compacted_tokens,
    sum(c.again) FILTER (c.reason = 'unattributed')::BIGINT AS reprefill_unattributed_tokens,
    sum(c.prompt_again)::BIGINT AS prompt_reprefill_tokens,
    count(*) FILTER (c.compacted) AS compactions,
    sum(c.removed)::BIGINT AS compaction_removed_tokens,
    sum(c.compaction_after)::BIGINT AS compaction_after_tokens,
    sum(c.compaction_after) FILTER (c.usable)::BIGINT AS compaction_trained_tokens,
    sum(c.context + c.cut) FILTER (c.compacted)::BIGINT AS compaction_history_tokens,
    sum(CAST(round(c.cut * c.again / nullif(c.context, 0)) AS BIGINT)) FILTER (NOT c.compacted AND c.cut > 0)::BIGINT
        AS compaction_avoided_tokens,
    sum(c.context) FILTER (NOT c.compacted AND c.context > 0)::BIGINT AS history_tokens,
    sum(c.again) FILTER (NOT c.compacted AND c.context > 0)::BIGINT AS history_reprefill_tokens,
    sum(c.input - c.served) FILTER (c.prefill_time_s IS NOT NULL)::BIGINT AS timed_prefill_tokens,
    sum(CAST(round(c.prefill_time_s * 1e9) AS BIGINT))::BIGINT AS prefill_ns
FROM cut AS c CROSS JOIN (VALUES (false), (true)) AS g(per_turn_index)
GROUP BY ALL;
-- The name the analyses read; a reader reads the store's derived table (queries/tables.py).
CREATE OR REPLACE MACRO _prefill_split(run) AS TABLE SELECT * FROM _prefill_split_src(run);

-- _prefill_split_work(run, per_turn): the split's rows of one grain (per_turn: per turn index too) with the
-- prefill seconds each part costs at the turns' measured prefill rate (prefill seconds per token prefilled, of
-- the turns that recorded prefill time, per step and environment): the history prefilled again for each reason,
-- the task prompt prefilled again, and what compaction costs in prefill (compaction_prefill_s: its compacted
-- turns' history less what the removed tokens would have cost the later turns and the compacted turns
-- themselves, at their share of history prefilled again). NULL where no turn of the step and environment
-- recorded prefill time. prefill_split.sql and the advisor's levers read it: one definition of each second.
CREATE OR REPLACE MACRO _prefill_split_work(run, per_turn) AS TABLE
WITH rate AS (
    SELECT
        step, environment,
        prefill_ns / 1e9 / nullif(timed_prefill_tokens, 0) AS s_per_token,
        coalesce(history_reprefill_tokens / nullif(history_tokens, 0), 0) AS history_share
    FROM _prefill_split(run)
    WHERE NOT per_turn_index
)
SELECT
    s.*,
    r.s_per_token,
    r.s_per_token * coalesce(s.reprefill_retokenized_tokens, 0) AS reprefill_retokenized_s,
    r.s_per_token * coalesce(s.reprefill_evicted_tokens, 0) AS reprefill_evicted_s,
    r.s_per_token * coalesce(s.reprefill_server_changed_tokens, 0) AS reprefill_server_changed_s,
    r.s_per_token * coalesce(s.reprefill_compacted_tokens, 0) AS reprefill_compacted_s,
    r.s_per_token * coalesce(s.reprefill_unattributed_tokens, 0) AS reprefill_unattributed_s,
    r.s_per_token * s.prompt_reprefill_tokens AS prompt_reprefill_s,
    r.s_per_token * s.new_tokens AS new_s,
    r.s_per_token * (
        coalesce(s.reprefill_compacted_tokens, 0) - coalesce(s.compaction_avoided_tokens, 0)
        - coalesce(s.compaction_history_tokens, 0) * r.history_share
    ) AS compaction_prefill_s
FROM _prefill_split(run) AS s
LEFT JOIN rate AS r ON r.step IS NOT DISTINCT FROM s.step AND r.environment IS NOT DISTINCT FROM s.environment
WHERE s.per_turn_index = per_turn;
