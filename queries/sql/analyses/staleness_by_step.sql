-- Staleness per consuming step: mean policy versions behind, the share within rl.staleness.bound
-- (within_bound_share), the samples beyond it (beyond_bound) and how many of those the trainer used anyway
-- (used_beyond_bound: the violations proper); named as staleness_summary and `report` name them.
SELECT
    c.step,
    count(*) AS samples,
    avg(c.staleness) AS mean_staleness,
    max(c.staleness) AS max_staleness,
    avg(CASE WHEN c.staleness <= coalesce(c.bound, c.staleness) THEN 1.0 ELSE 0.0 END) AS within_bound_share,
    count(*) FILTER (c.staleness > c.bound) AS beyond_bound,
    count(*) FILTER (c.staleness > c.bound AND c.decision = 'used') AS used_beyond_bound,
    any_value(c.bound) AS staleness_bound
FROM consumed_samples($run_id, $step_lo, $step_hi, $environment) AS c
GROUP BY c.step
ORDER BY c.step
