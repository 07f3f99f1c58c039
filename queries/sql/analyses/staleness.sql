-- Staleness at consumption (docs/metrics.md): how many consumed samples were 0, 1, 2, ... policy versions
-- behind and whether that is within rl.staleness.bound (samples beyond it are violations of the bound), and
-- how many of them the trainer used (recorded 'used' decisions), so a trainer that ignores the bound shows.
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
    c.staleness,
    count(*) AS samples,
    coalesce(c.staleness <= b.bound, true) AS within_bound,
    count(*) FILTER (c.staleness > b.bound) AS violations,
    count(*) FILTER (c.decision = 'used') AS used,
    any_value(b.bound) AS staleness_bound
FROM consumed AS c, bound AS b
GROUP BY c.staleness, b.bound
ORDER BY c.staleness
