-- Advisor lever "prefix continuity" (docs/advisor.md): exact prefix continuity across turns, so no turn prefills
-- again history it already had, for any reason but compaction (the compaction lever's): token-level rendering
-- (retokenized), a prefix cache that keeps each rollout's history (evicted) and finds it where the next turn
-- runs (server_changed: sticky routing), and the unattributed rest. Each reason's prefill seconds are its tokens
-- at the turns' measured prefill rate, per step and environment (_prefill_split_work, macros/11):
--   Δwork_rollout = − Σ (retokenized + evicted + server_changed + unattributed) prefill seconds
-- usable is unchanged. Does not apply to single-turn runs, when no turn prefilled its history again, or when no
-- turn recorded its prefill time.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
w AS (  -- the split per step and environment, over the consumed steps read
    SELECT
        coalesce(sum(reprefill_retokenized_tokens), 0) AS retokenized_tokens,
        coalesce(sum(reprefill_evicted_tokens), 0) AS evicted_tokens,
        coalesce(sum(reprefill_server_changed_tokens), 0) AS server_changed_tokens,
        coalesce(sum(reprefill_unattributed_tokens), 0) AS unattributed_tokens,
        sum(reprefill_retokenized_s) AS retokenized_s,
        sum(reprefill_evicted_s) AS evicted_s,
        sum(reprefill_server_changed_s) AS server_changed_s,
        sum(reprefill_unattributed_s) AS unattributed_s,
        sum(cached_tokens) / nullif(sum(input_tokens), 0) AS cache_hit_rate,
        sum(prefill_ns) / 1e9 AS prefill_s
    FROM _prefill_split_work($run_id, false)
    WHERE step IS NOT NULL AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
deepest AS (
    SELECT max(turn_index) AS max_turn_index
    FROM _prefill_split($run_id)
    WHERE per_turn_index AND step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
est AS (
    SELECT
        w.*, d.max_turn_index,
        w.retokenized_tokens + w.evicted_tokens + w.server_changed_tokens + w.unattributed_tokens
            AS reprefill_tokens,
        -(coalesce(w.retokenized_s, 0) + coalesce(w.evicted_s, 0) + coalesce(w.server_changed_s, 0)
          + coalesce(w.unattributed_s, 0)) AS d_rollout_s
    FROM w, deepest AS d
),
judged AS (
    SELECT
        e.*,
        coalesce(e.max_turn_index, 0) > 0 AND e.d_rollout_s < 0 AS applies,
        CASE
            WHEN coalesce(e.max_turn_index, 0) = 0 THEN 'single-turn rollouts: there is no history to reuse'
            WHEN e.reprefill_tokens = 0 THEN 'no turn prefilled its history again'
            WHEN e.d_rollout_s >= 0 THEN 'no turn recorded its prefill time (prefill_time_s)'
        END AS why_not,
        'reprefill_tokens' AS metric,
        e.reprefill_tokens::DOUBLE AS before,
        0.0 AS after,
        b.usable::DOUBLE AS usable_after
    FROM est AS e, b
)
SELECT 'prefix_continuity' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
