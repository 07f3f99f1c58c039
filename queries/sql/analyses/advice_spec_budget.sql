-- Advisor lever "speculative budget by length" (docs/advisor.md, after DAS, Shao et al. 2025): $extra_k more
-- drafted tokens per verify step for rollouts decoding at least $long_tokens tokens, where acceptance holds.
-- Per turn group of such rollouts (environment, k, length bucket, versions since the drafter was built) the
-- per-token acceptance α is the one whose Leviathan yield E(α, k) = (1 − α^(k+1)) / (1 − α) equals the measured
-- tokens per verify step; at k' = k + $extra_k a verify step yields E(α, k') and costs (1 + c·k') / (1 + c·k)
-- times as long, c = $verify_cost (the extra cost of one drafted token in a verify step, an assumption):
--   Δwork_rollout = Σ decode seconds × (E(α, k) / E(α, k') × (1 + c·k') / (1 + c·k) − 1)
-- over the groups where that is a saving (acceptance high enough). usable is unchanged.
-- Does not apply without speculative decoding or long rollouts, or where no group would save.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
rows AS (  -- turn groups in which every turn drafted (_advice_spec_sums)
    SELECT
        environment, spec_k, length_bucket, since,
        sum(decode_tokens) AS decode_tokens, sum(verify_steps) AS verify_steps, sum(decode_ns) AS decode_ns,
        sum(accepted) AS accepted, sum(drafted) AS drafted
    FROM _advice_spec_sums($run_id)
    WHERE spec_k > 0 AND step IS NOT NULL AND length_bucket >= $long_tokens
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
    GROUP BY ALL
),
grid AS (SELECT i / 400.0 AS alpha FROM range(1, 400) AS t(i)),  -- α to ±0.00125
fitted AS (
    SELECT
        r.*,
        arg_min(g.alpha, abs((1 - pow(g.alpha, r.spec_k + 1)) / (1 - g.alpha) - r.decode_tokens / r.verify_steps))
            AS alpha
    FROM rows AS r, grid AS g
    GROUP BY ALL
),
saved AS (
    SELECT
        *,
        decode_ns / 1e9 * (
            ((1 - pow(alpha, spec_k + 1)) / (1 - alpha)) / ((1 - pow(alpha, spec_k + $extra_k + 1)) / (1 - alpha))
            * (1 + $verify_cost * (spec_k + $extra_k)) / (1 + $verify_cost * spec_k) - 1
        ) AS d_s
    FROM fitted
),
rows_all AS (SELECT count(*) AS groups, sum(decode_ns) / 1e9 AS long_decode_s, min(spec_k) AS k FROM rows),
paying AS (  -- the groups where a larger budget saves
    SELECT
        sum(accepted) / nullif(sum(drafted), 0) AS long_acceptance,
        sum(decode_ns) / 1e9 AS decode_s_where_it_pays,
        coalesce(sum(d_s), 0) AS d_rollout_s
    FROM saved
    WHERE d_s < 0
),
est AS (  -- one row of one-row aggregates (as scalar subqueries they cost the optimizer more than the query)
    SELECT
        $long_tokens AS long_tokens,
        r.groups,
        r.long_decode_s,
        p.long_acceptance,
        p.decode_s_where_it_pays,
        r.k,
        r.k + $extra_k AS k_after,
        p.d_rollout_s
    FROM rows_all AS r, paying AS p
),
judged AS (
    SELECT
        e.*,
        e.groups > 0 AND e.d_rollout_s < 0 AS applies,
        CASE
            WHEN e.groups = 0 THEN 'no speculative decoding in rollouts of at least the long length'
            WHEN e.d_rollout_s >= 0 THEN 'acceptance on long rollouts is too low for a larger budget to pay'
        END AS why_not,
        'spec_k' AS metric,
        e.k::DOUBLE AS before,
        e.k_after::DOUBLE AS after,
        b.usable::DOUBLE AS usable_after
    FROM est AS e, b
)
SELECT 'spec_budget' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
