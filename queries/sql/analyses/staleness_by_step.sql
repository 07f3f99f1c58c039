-- Staleness per consuming step: mean policy versions behind, the share within rl.staleness.bound
-- (within_bound_share), the samples beyond it (beyond_bound) and how many of those the trainer used anyway
-- (used_beyond_bound: the violations proper); named as staleness_summary and `report` name them.
-- Counted from the rollouts per step, environment, staleness and decision kept ahead (_staleness_sums,
-- macros/07); the consumed samples are those of consumed_samples (macros/03).
SELECT
    c.step,
    sum(c.samples)::BIGINT AS samples,
    sum(c.staleness * c.samples) / sum(c.samples) AS mean_staleness,
    max(c.staleness) AS max_staleness,
    coalesce(sum(c.samples) FILTER (c.staleness <= coalesce(c.bound, c.staleness)), 0) / sum(c.samples)
        AS within_bound_share,
    coalesce(sum(c.samples) FILTER (c.staleness > c.bound), 0)::BIGINT AS beyond_bound,
    coalesce(sum(c.samples) FILTER (c.staleness > c.bound AND c.decision = 'used'), 0)::BIGINT
        AS used_beyond_bound,
    any_value(c.bound) AS staleness_bound
FROM _staleness_sums($run_id) AS c
WHERE c.step IS NOT NULL AND c.staleness IS NOT NULL
  AND ($step_lo IS NULL OR c.step >= $step_lo)
  AND ($step_hi IS NULL OR c.step <= $step_hi)
  AND ($environment IS NULL OR c.environment = $environment)
GROUP BY c.step
ORDER BY c.step
