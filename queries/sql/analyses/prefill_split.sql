-- Repeated prefill by remedy (docs/metrics.md): the turns' prompt tokens for the run or per environment, turn
-- index or consuming step ($by), split by what would have spared their prefill: cached (served from the prefix
-- cache), new (irreducible: observations, the first prefill of a task prompt), history prefilled again because
-- continuity broke (retokenized, evicted, server_changed, compacted, unattributed), the task prompt prefilled
-- again by a group's members; the tokens compaction removed, the extra training samples it started and the
-- tokens they train on again. Each prefilled part's device-seconds are its prefill seconds at the turns'
-- measured prefill rate (_prefill_split_work, macros/11) × the rollout fleet's device-seconds per work-second u,
-- as the advisor costs time (docs/advisor.md). Compaction's net device-seconds: what it costs in prefill (its
-- compacted turns' history, less what the tokens it removed would have cost later turns) plus its repeated
-- training tokens at the trainer's measured seconds per token × u; its net effect on usable tokens per
-- device-second is −net / D, D the selection's device-seconds (the tokens usable rollouts decoded are as they
-- were). u, the trainer's seconds per token and D are the advisor's starting point ($base: advice_base.sql's row
-- for the step range, _advice_base in macros/10).
WITH b AS (SELECT unnest($base)),
u AS (
    SELECT
        rollout_device_s / nullif(rollout_work_s, 0) AS u_rollout,
        train_device_s / nullif(train_work_s, 0) * train_s_per_token AS train_device_s_per_token,
        device_seconds
    FROM b
),
rows AS (
    SELECT * FROM _prefill_split_work($run_id, coalesce($by = 'turn_index', false))
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
sums AS (
    SELECT
        CASE WHEN $by = 'environment' THEN environment END AS environment,
        CASE WHEN $by = 'turn_index' THEN turn_index END AS turn_index,
        CASE WHEN $by = 'step' THEN step END AS step,
        sum(turns)::BIGINT AS turns,
        coalesce(sum(input_tokens), 0)::BIGINT AS prefill_tokens,
        coalesce(sum(cached_tokens), 0)::BIGINT AS cached_tokens,
        coalesce(sum(new_tokens), 0)::BIGINT AS new_tokens,
        coalesce(sum(reprefill_retokenized_tokens), 0)::BIGINT AS reprefill_retokenized_tokens,
        coalesce(sum(reprefill_evicted_tokens), 0)::BIGINT AS reprefill_evicted_tokens,
        coalesce(sum(reprefill_server_changed_tokens), 0)::BIGINT AS reprefill_server_changed_tokens,
        coalesce(sum(reprefill_compacted_tokens), 0)::BIGINT AS reprefill_compacted_tokens,
        coalesce(sum(reprefill_unattributed_tokens), 0)::BIGINT AS reprefill_unattributed_tokens,
        coalesce(sum(prompt_reprefill_tokens), 0)::BIGINT AS prompt_reprefill_tokens,
        coalesce(sum(compaction_removed_tokens), 0)::BIGINT AS compaction_removed_tokens,
        coalesce(sum(compactions), 0)::BIGINT AS extra_samples,
        coalesce(sum(compaction_trained_tokens), 0)::BIGINT AS compaction_train_tokens,
        sum(new_s) AS new_s,
        sum(reprefill_retokenized_s) AS reprefill_retokenized_s,
        sum(reprefill_evicted_s) AS reprefill_evicted_s,
        sum(reprefill_server_changed_s) AS reprefill_server_changed_s,
        sum(reprefill_compacted_s) AS reprefill_compacted_s,
        sum(reprefill_unattributed_s) AS reprefill_unattributed_s,
        sum(prompt_reprefill_s) AS prompt_reprefill_s,
        sum(compaction_prefill_s) AS compaction_prefill_s
    FROM rows
    GROUP BY ALL
)
SELECT
    s.* EXCLUDE (new_s, reprefill_retokenized_s, reprefill_evicted_s, reprefill_server_changed_s,
                 reprefill_compacted_s, reprefill_unattributed_s, prompt_reprefill_s, compaction_prefill_s),
    s.reprefill_retokenized_tokens + s.reprefill_evicted_tokens + s.reprefill_server_changed_tokens
        + s.reprefill_compacted_tokens + s.reprefill_unattributed_tokens AS reprefill_tokens,
    s.new_s * u.u_rollout AS new_device_s,
    (coalesce(s.reprefill_retokenized_s, 0) + coalesce(s.reprefill_evicted_s, 0)
     + coalesce(s.reprefill_server_changed_s, 0) + coalesce(s.reprefill_compacted_s, 0)
     + coalesce(s.reprefill_unattributed_s, 0)) * u.u_rollout AS reprefill_device_s,
    s.reprefill_retokenized_s * u.u_rollout AS reprefill_retokenized_device_s,
    s.reprefill_evicted_s * u.u_rollout AS reprefill_evicted_device_s,
    s.reprefill_server_changed_s * u.u_rollout AS reprefill_server_changed_device_s,
    s.reprefill_compacted_s * u.u_rollout AS reprefill_compacted_device_s,
    s.reprefill_unattributed_s * u.u_rollout AS reprefill_unattributed_device_s,
    s.prompt_reprefill_s * u.u_rollout AS prompt_reprefill_device_s,
    s.compaction_prefill_s * u.u_rollout AS compaction_prefill_device_s,
    s.compaction_train_tokens * u.train_device_s_per_token AS compaction_train_device_s,
    s.compaction_prefill_s * u.u_rollout + s.compaction_train_tokens * u.train_device_s_per_token
        AS compaction_net_device_s,
    -(s.compaction_prefill_s * u.u_rollout + s.compaction_train_tokens * u.train_device_s_per_token)
        / nullif(u.device_seconds, 0) AS compaction_usable_tokens_per_device_s_change
FROM sums AS s, u
ORDER BY ALL NULLS LAST
