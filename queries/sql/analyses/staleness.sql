-- Staleness at consumption (docs/metrics.md): how many consumed samples were 0, 1, 2, ... policy versions
-- behind and whether that is within rl.staleness.bound (samples beyond it are violations of the bound), and
-- how many of them the trainer used (recorded 'used' decisions), so a trainer that ignores the bound shows.
SELECT
    c.staleness,
    count(*) AS samples,
    coalesce(c.staleness <= c.bound, true) AS within_bound,
    count(*) FILTER (c.staleness > c.bound) AS violations,
    count(*) FILTER (c.decision = 'used') AS used,
    any_value(c.bound) AS staleness_bound
FROM consumed_samples($run_id, $step_lo, $step_hi, $environment) AS c
GROUP BY c.staleness, c.bound
ORDER BY c.staleness
