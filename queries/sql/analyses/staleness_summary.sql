-- Staleness over every consumed sample of the selection (docs/report.md): the mean and largest number of policy
-- versions behind, the share within rl.staleness.bound, the samples beyond it and how many of those the
-- trainer used anyway (the violations proper), and the run's declared bound, known before any sample is
-- consumed. freshness_rate and violations are the older names of within_bound_share and beyond_bound.
WITH c AS (
    SELECT * FROM consumed_samples($run_id, $step_lo, $step_hi, $environment)
),
figures AS (
    SELECT
        count(*) AS samples,
        avg(staleness)::DOUBLE AS mean,
        max(staleness) AS max,
        count(*) FILTER (coalesce(staleness <= bound, true)) / nullif(count(*), 0) AS within_bound_share,
        count(*) FILTER (staleness > bound) AS beyond_bound,
        count(*) FILTER (staleness > bound AND decision = 'used') AS used_beyond_bound
    FROM c
)
SELECT
    f.*,
    (SELECT max(staleness_bound) FROM rollout_stages($run_id)) AS bound,
    f.within_bound_share AS freshness_rate,
    f.beyond_bound AS violations
FROM figures AS f
