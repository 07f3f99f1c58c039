-- Advisor lever "compaction" (docs/advisor.md): context compaction off, at the rate the run compacted. It gives
-- back what compaction costs: the prefill of each compacted turn's new history and the tokens each extra training
-- sample of a usable rollout trains on again (its compacted history, rl.compaction.tokens_after); and it takes back what compaction
-- spared: the removed tokens, which later turns would have prefilled again in the share they prefilled their own
-- history, and the compacted turns in the share their environment's other later turns did (_prefill_split_work,
-- macros/11, at the turns' measured prefill rate per step and environment):
--   Δwork_rollout = − compaction prefill seconds,   Δtrain tokens = − Σ tokens after compaction (usable rollouts)
-- usable is unchanged. A negative gain says compaction pays for itself: keep it. Does not apply when no turn
-- recorded a compaction (turning it on needs a threshold this run never measured) or its prefill time.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
w AS (
    SELECT
        coalesce(sum(compactions), 0)::BIGINT AS extra_samples,
        coalesce(sum(compaction_removed_tokens), 0) AS removed_tokens,
        coalesce(sum(compaction_trained_tokens), 0) AS train_tokens_again,
        sum(reprefill_compacted_s) AS compacted_prefill_s,
        sum(compaction_prefill_s) AS compaction_prefill_s
    FROM _prefill_split_work($run_id, false)
    WHERE step IS NOT NULL AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
judged AS (
    SELECT
        w.*,
        -coalesce(w.compaction_prefill_s, 0) AS d_rollout_s,
        -w.train_tokens_again AS d_train_tokens,
        w.extra_samples > 0 AND w.compaction_prefill_s IS NOT NULL AS applies,
        CASE
            WHEN w.extra_samples = 0 THEN 'no turn recorded a context compaction'
            WHEN w.compaction_prefill_s IS NULL THEN 'no turn recorded its prefill time (prefill_time_s)'
        END AS why_not,
        'extra_samples' AS metric,
        w.extra_samples::DOUBLE AS before,
        0.0 AS after,
        b.usable::DOUBLE AS usable_after
    FROM w, b
)
SELECT 'compaction' AS lever, j.*,
    _advice_trained_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0, j.d_train_tokens)
        AS _change
FROM judged AS j
