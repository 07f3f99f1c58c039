-- Staleness over every consumed sample of the selection (docs/report.md): the mean and largest number of policy
-- versions behind, the share within rl.staleness.bound, the samples beyond it and how many of those the
-- trainer used anyway (the violations proper) or not (unused_beyond_bound), and the run's declared bound,
-- known before any sample is consumed. freshness_rate and violations are the older names of within_bound_share and beyond_bound.
-- Counted from the consumed rollouts per step, environment, staleness and decision kept ahead (_staleness_sums,
-- macros/07), the rows consumed_samples (macros/03) would give.
WITH c AS (
    SELECT * FROM _staleness_sums($run_id)
    WHERE step IS NOT NULL AND staleness IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
figures AS (
    SELECT
        coalesce(sum(samples), 0)::BIGINT AS samples,
        (sum(staleness * samples) / nullif(sum(samples), 0))::DOUBLE AS mean,
        max(staleness) AS max,
        coalesce(sum(samples) FILTER (coalesce(staleness <= bound, true)), 0) / nullif(sum(samples), 0)
            AS within_bound_share,
        coalesce(sum(samples) FILTER (staleness > bound), 0)::BIGINT AS beyond_bound,
        coalesce(sum(samples) FILTER (staleness > bound AND decision = 'used'), 0)::BIGINT AS used_beyond_bound
    FROM c
)
SELECT
    f.*,
    f.beyond_bound - f.used_beyond_bound AS unused_beyond_bound,
    (SELECT max(bound) FROM _staleness_sums($run_id)) AS bound,
    f.within_bound_share AS freshness_rate,
    f.beyond_bound AS violations
FROM figures AS f
