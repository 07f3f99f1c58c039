-- Advisor lever "staleness bound" (docs/advisor.md): the bound one policy version looser. Samples with
-- nonzero signal that the trainer dropped as stale but were at most bound + 1 versions behind become usable:
--   freshness_after = (nonzero-signal rollouts with staleness ≤ bound + 1) / nonzero-signal rollouts
--   usable_after    = usable × freshness_after / freshness
-- Assumes the staleness distribution stays as measured (the rollout servers keep the same lag). The price is
-- more off-policy samples; a tighter bound would instead cost trainer idle time (evidence: the trainer's idle
-- fraction). Does not apply when the run declares no bound or nothing was beyond it.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
-- In the same scan, the bound as declared (every row, from the first rollout on): a run that has consumed
-- nothing yet still declares one.
counts AS (
    SELECT
        max(bound) FILTER (kept) AS bound,
        max(bound) AS declared,
        coalesce(sum(samples) FILTER (kept), 0)::BIGINT AS nonzero_signal,
        coalesce(sum(samples) FILTER (kept AND staleness > bound), 0)::BIGINT AS beyond_bound,
        coalesce(sum(samples) FILTER (kept AND staleness <= bound + 1), 0)::BIGINT AS within_looser
    FROM (
        SELECT
            bound, samples, staleness,
            nonzero_signal AND step IS NOT NULL
                AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi) AS kept
        FROM _staleness_sums($run_id)
    )
),
idle AS (
    SELECT sum(coalesce(train_wait_s, 0)) / nullif(sum(duration_s), 0) AS trainer_idle_fraction
    FROM _steps($run_id)
    WHERE ($step_lo IS NULL OR train_step >= $step_lo) AND ($step_hi IS NULL OR train_step <= $step_hi)
),
est AS (
    SELECT
        coalesce(c.bound, c.declared) AS bound,
        coalesce(c.bound, c.declared) + 1 AS looser_bound,
        c.beyond_bound,
        i.trainer_idle_fraction,
        c.bound IS NOT NULL AND c.beyond_bound > 0 AS applies,
        CASE WHEN c.declared IS NULL THEN 'the run declares no staleness bound'
             WHEN c.nonzero_signal = 0 THEN 'no sample with nonzero signal consumed yet'
             WHEN c.beyond_bound = 0 THEN 'no sample was beyond the bound' END AS why_not,
        'freshness_rate' AS metric,
        b.freshness_rate AS before,
        c.within_looser / nullif(c.nonzero_signal, 0) AS after,
        b.usable * (c.within_looser / nullif(c.nonzero_signal, 0)) / nullif(b.freshness_rate, 0) AS usable_after
    FROM b, counts AS c, idle AS i
)
SELECT 'staleness' AS lever, e.*,
    _advice_change(CASE WHEN e.applies THEN e.usable_after END, 0.0, 0.0, 0.0) AS _change
FROM est AS e
