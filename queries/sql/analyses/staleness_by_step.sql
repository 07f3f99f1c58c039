-- Staleness per consuming step: mean policy versions behind, the share within rl.staleness.bound, samples
-- beyond it (violations) and how many of those the trainer used anyway.
WITH bound AS (
    SELECT max(staleness_bound) AS bound FROM spans WHERE run_id = $run_id
),
consumed AS (
    SELECT s.step, s.staleness, s.decision, s.environment
    FROM rollout_steps($run_id) AS s
    WHERE s.step IS NOT NULL AND s.staleness IS NOT NULL
      AND ($step_lo IS NULL OR s.step >= $step_lo)
      AND ($step_hi IS NULL OR s.step <= $step_hi)
      AND ($environment IS NULL OR s.environment = $environment)
)
SELECT
    c.step,
    count(*) AS samples,
    avg(c.staleness) AS mean_staleness,
    max(c.staleness) AS max_staleness,
    avg(CASE WHEN c.staleness <= coalesce(b.bound, c.staleness) THEN 1.0 ELSE 0.0 END) AS freshness_rate,
    count(*) FILTER (c.staleness > b.bound) AS violations,
    count(*) FILTER (c.staleness > b.bound AND c.decision = 'used') AS used_beyond_bound,
    any_value(b.bound) AS staleness_bound
FROM consumed AS c, bound AS b
GROUP BY c.step
ORDER BY c.step
