-- Staleness at consumption (docs/metrics.md): how many consumed samples were 0, 1, 2, ... policy versions
-- behind and whether that is within rl.staleness.bound (samples beyond it are violations of the bound), and
-- how many of them the trainer used (recorded 'used' decisions), so a trainer that ignores the bound shows.
-- The consumed samples (consumed_samples, macros/03) counted from the rollouts per step, environment,
-- staleness and decision kept ahead (_staleness_sums, macros/07).
SELECT
    c.staleness,
    sum(c.samples)::BIGINT AS samples,
    coalesce(c.staleness <= c.bound, true) AS within_bound,
    coalesce(sum(c.samples) FILTER (c.staleness > c.bound), 0)::BIGINT AS violations,
    coalesce(sum(c.samples) FILTER (c.decision = 'used'), 0)::BIGINT AS used,
    any_value(c.bound) AS staleness_bound
FROM _staleness_sums($run_id) AS c
WHERE c.step IS NOT NULL AND c.staleness IS NOT NULL
  AND ($step_lo IS NULL OR c.step >= $step_lo)
  AND ($step_hi IS NULL OR c.step <= $step_hi)
  AND ($environment IS NULL OR c.environment = $environment)
GROUP BY c.staleness, c.bound
ORDER BY c.staleness
