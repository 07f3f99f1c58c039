-- Advisor lever "prefill-decode disaggregation" (docs/advisor.md). The reference's conditions, read from the
-- turn sums per step (_prefill_sums): new-prefill : decode ≥ $min_ratio, stable across ≥ $min_steps consumed steps (coefficient of
-- variation ≤ $max_step_cv), mean turn latency (prefill + decode) ≥ $min_turn_latency_s, ≥ $min_turns_per_rollout
-- turns per rollout, and a model of ≥ $min_model_parameters parameters (2·P·tokens = the generation FLOPs).
-- Only where all hold is there an estimate, and it is an upper bound: decoding requests no longer wait behind
-- long prefills on a shared device, taken as $stall_share of the prefill seconds:
--   Δwork_rollout = − $stall_share × prefill seconds
-- (KV transfer and pool balancing cost nothing in it). usable is unchanged.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
sums AS (  -- the turns' sums per step (_prefill_sums over environments)
    SELECT
        step, sum(turns) AS turns, sum(new_prefill_tokens) AS new_prefill_tokens,
        sum(decode_tokens) AS decode_tokens, sum(prefill_ns) AS prefill_ns, sum(decode_ns) AS decode_ns
    FROM _prefill_sums($run_id)
    WHERE NOT per_turn_index AND step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
    GROUP BY step
),
flops AS (
    SELECT sum(flops)::DOUBLE AS flops
    FROM _step_sums($run_id)
    WHERE term = 'rollout' AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
totals AS (  -- one pass over the steps' sums (each step's ratio is a row's: sums has one row per step)
    SELECT
        sum(new_prefill_tokens) / nullif(sum(decode_tokens), 0) AS prefill_decode_ratio,
        count(new_prefill_tokens / nullif(decode_tokens, 0)) AS steps,
        stddev_pop(new_prefill_tokens / nullif(decode_tokens, 0))
            / nullif(avg(new_prefill_tokens / nullif(decode_tokens, 0)), 0) AS step_ratio_cv,
        (sum(prefill_ns) + sum(decode_ns)) / 1e9 / nullif(sum(turns), 0) AS turn_latency_s,
        sum(turns) AS turns,
        sum(new_prefill_tokens) + sum(decode_tokens) AS tokens,
        sum(prefill_ns) / 1e9 AS prefill_s
    FROM sums
),
f AS (
    SELECT
        t.prefill_decode_ratio,
        t.steps,
        t.step_ratio_cv,
        t.turn_latency_s,
        t.turns / nullif(b.dispatched, 0) AS turns_per_rollout,
        flops.flops / nullif(2 * t.tokens, 0) AS model_parameters,
        t.prefill_s
    FROM totals AS t, flops, b
),
checks AS (
    SELECT
        f.*,
        coalesce(prefill_decode_ratio >= $min_ratio, false) AS large_ratio,
        coalesce(steps >= $min_steps AND step_ratio_cv <= $max_step_cv, false) AS stable,
        coalesce(turn_latency_s >= $min_turn_latency_s, false) AS slow_turns,
        coalesce(turns_per_rollout >= $min_turns_per_rollout, false) AS multi_turn,
        coalesce(model_parameters >= $min_model_parameters, false) AS large_model
    FROM f
),
judged AS (
    SELECT
        c.*,
        large_ratio AND stable AND slow_turns AND multi_turn AND large_model AS applies,
        CASE
            WHEN prefill_decode_ratio IS NULL THEN 'no turns with decode tokens recorded'
            WHEN NOT multi_turn THEN 'single-turn work: moving the KV cache costs more than it saves'
            WHEN NOT large_ratio THEN 'prefill : decode is not a large imbalance'
            WHEN NOT stable THEN 'the prefill : decode imbalance is not stable across steps'
            WHEN NOT slow_turns THEN 'turns are too short for their latency to limit throughput'
            WHEN NOT large_model THEN 'the model is too small for KV transfer to pay'
        END AS why_not,
        'prefill_decode_ratio' AS metric,
        prefill_decode_ratio AS before,
        NULL::DOUBLE AS after,
        b.usable::DOUBLE AS usable_after,
        -$stall_share * coalesce(prefill_s, 0) AS d_rollout_s
    FROM checks AS c, b
)
SELECT 'disaggregation' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
