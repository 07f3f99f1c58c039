-- Advisor lever "prefix reuse" (docs/advisor.md): exact prefix continuity across turns (token-level
-- rendering), so no turn prefills again the history it already had (re-prefill waste = context − cached
-- tokens). Prefill time is new prefill tokens over the environment's measured prefill rate:
--   Δwork_rollout = − Σ_env re-prefill waste tokens_env × prefill seconds_env / new prefill tokens_env
-- usable is unchanged. Does not apply to single-turn runs or when no turn re-prefilled its history.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
per_env AS (  -- the turns' sums per step and environment (and turn index: per_turn_index), _prefill_sums
    SELECT
        environment,
        sum(reprefill_waste_tokens) FILTER (NOT per_turn_index) AS waste,
        sum(new_prefill_tokens) FILTER (NOT per_turn_index) AS new_prefill,
        sum(cached_prefill_tokens) FILTER (NOT per_turn_index) AS cached,
        sum(input_tokens) FILTER (NOT per_turn_index) AS input_tokens,
        sum(prefill_ns) FILTER (NOT per_turn_index) / 1e9 AS prefill_s,
        max(turn_index) FILTER (per_turn_index) AS max_turn_index
    FROM _prefill_sums($run_id)
    WHERE step IS NOT NULL AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
    GROUP BY environment
),
est AS (
    SELECT
        sum(waste) AS reprefill_waste_tokens,
        sum(cached) / nullif(sum(input_tokens), 0) AS cache_hit_rate,
        sum(prefill_s) AS prefill_s,
        max(max_turn_index) AS max_turn_index,
        -coalesce(sum(waste * prefill_s / nullif(new_prefill, 0)), 0) AS d_rollout_s
    FROM per_env
),
judged AS (
    SELECT
        e.*,
        coalesce(e.max_turn_index, 0) > 0 AND e.d_rollout_s < 0 AS applies,
        CASE
            WHEN coalesce(e.max_turn_index, 0) = 0 THEN 'single-turn rollouts: there is no history to reuse'
            WHEN e.d_rollout_s >= 0 THEN 'no turn prefilled its history again'
        END AS why_not,
        'reprefill_waste_tokens' AS metric,
        e.reprefill_waste_tokens::DOUBLE AS before,
        0.0 AS after,
        b.usable::DOUBLE AS usable_after
    FROM est AS e, b
)
SELECT 'prefix_reuse' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
