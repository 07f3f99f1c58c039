-- Staleness excursions: over each run of $window consecutive consuming train steps (fewer at the start), the
-- share of consumed samples beyond rl.staleness.bound; the worst window first (the earliest of equals). Also
-- the run's samples used beyond the bound (none allowed) and its bound: what the staleness-violations check
-- reads (docs/report.md). No rows before any sample is consumed. Counted from _staleness_sums (macros/07).
WITH by_step AS (
    SELECT
        c.step,
        sum(c.samples) AS samples,
        coalesce(sum(c.samples) FILTER (c.staleness > c.bound), 0) AS violations,
        coalesce(sum(c.samples) FILTER (c.staleness > c.bound AND c.decision = 'used'), 0) AS used_beyond_bound,
        any_value(c.bound) AS bound
    FROM _staleness_sums($run_id) AS c
    WHERE c.step IS NOT NULL AND c.staleness IS NOT NULL
    GROUP BY c.step
),
windows AS (
    SELECT
        first_value(step) OVER w AS first_step,
        step AS last_step,
        sum(violations) OVER w / sum(samples) OVER w AS beyond_bound_share
    FROM by_step
    WINDOW w AS (ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
)
SELECT
    w.first_step,
    w.last_step,
    w.beyond_bound_share,
    (SELECT sum(used_beyond_bound) FROM by_step)::BIGINT AS used_beyond_bound,
    (SELECT bound FROM by_step ORDER BY step LIMIT 1) AS staleness_bound
FROM windows AS w
ORDER BY w.beyond_bound_share DESC, w.last_step
LIMIT 1
