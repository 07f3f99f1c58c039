-- Staleness per consuming step: mean policy versions behind, the share within rl.staleness.bound, samples
-- beyond it (violations) and how many of those the trainer used anyway.
SELECT
    c.step,
    count(*) AS samples,
    avg(c.staleness) AS mean_staleness,
    max(c.staleness) AS max_staleness,
    avg(CASE WHEN c.staleness <= coalesce(c.bound, c.staleness) THEN 1.0 ELSE 0.0 END) AS freshness_rate,
    count(*) FILTER (c.staleness > c.bound) AS violations,
    count(*) FILTER (c.staleness > c.bound AND c.decision = 'used') AS used_beyond_bound,
    any_value(c.bound) AS staleness_bound
FROM consumed_samples($run_id, $step_lo, $step_hi, $environment) AS c
GROUP BY c.step
ORDER BY c.step
