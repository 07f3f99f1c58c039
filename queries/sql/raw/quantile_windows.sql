-- The windows the run's exact percentiles are kept up to date with (run_percentiles, refresh "quantiles" in
-- queries/tables.py; queries/refresh.py's refresh_quantiles): for each percentile run_percentiles holds
-- (rollouts' decoded tokens and seconds at 0.5 / 0.9 / 0.99, turn latency at 0.5, verifier and judge calls'
-- latency at 0.5 / 0.99; over every environment and per environment), the values next to it in sorted order,
-- up to $k on each side. Per window:
--   rows   the rows of the values' table (rollout_tails, turn_latency, scoring) in its group, NULL values included
--   n      the values (not NULL); total: their sum (total_s, for seconds)
--   lo, hi the window holds every value strictly between them (NULL: no bound on that side)
--   below  how many values are <= lo (0 when lo is NULL)
--   window_values, window_counts: those values, sorted and distinct, and how many copies of each: the value
--          at rank r (0-based, of the n sorted) is the one whose copies hold position r - below of the window
-- Taken here over every value, around the percentiles @percentiles holds (the run_percentiles just derived):
-- what a full derivation pays, and a catch-up whose new values moved a percentile out of its window.
-- refresh_quantiles.sql moves the windows by the values a catch-up adds and removes: it costs those values.
-- (@percentiles: the relation holding the run's run_percentiles rows.)
CREATE OR REPLACE MACRO _quantile_values(run) AS TABLE
SELECT 'tokens' AS metric, environment, generated::DOUBLE AS v FROM _rollout_tails(run)
UNION ALL
SELECT 'seconds' AS metric, environment, duration_s AS v FROM _rollout_tails(run)
UNION ALL
SELECT 'latency' AS metric, environment, duration_s AS v FROM _turn_latency(run)
UNION ALL
SELECT kind || '_s' AS metric, environment, duration_s AS v FROM _scoring(run);
-- each percentile: its group, metric, slot in the list, q and value
CREATE OR REPLACE TEMP TABLE _qw_targets AS
SELECT r.all_environments, r.environment, m.metric, s.slot, m.qs[s.slot] AS q, m.ps[s.slot] AS p
FROM @percentiles AS r
CROSS JOIN LATERAL (
    VALUES ('tokens', [0.5, 0.9, 0.99]::DOUBLE[], r.tokens),  -- the fractions _run_percentiles_src takes
           ('seconds', [0.5, 0.9, 0.99]::DOUBLE[], r.seconds),
           ('latency', [0.5]::DOUBLE[], [r.turn_latency_p50_s]),
           ('verifier_s', [0.5, 0.99]::DOUBLE[], r.verifier_s),
           ('judge_s', [0.5, 0.99]::DOUBLE[], r.judge_s)
) AS m(metric, qs, ps)
CROSS JOIN range(1, 4) AS s(slot)
WHERE s.slot <= len(m.qs);
-- One pass over the values: per environment, against its own percentile and against the run's (whose lists
-- are merged over the environments below). No sort of the run's values: counts, and the $k nearest on each
-- side.
CREATE OR REPLACE TEMP TABLE _qw_parts AS
WITH targets AS (
    SELECT e.metric, e.environment, e.slot, e.q, e.p AS p_env, a.p AS p_all
    FROM _qw_targets AS e
    JOIN _qw_targets AS a ON a.all_environments AND a.metric = e.metric AND a.slot = e.slot
    WHERE NOT e.all_environments
)
SELECT
    t.metric, t.environment, t.slot, any_value(t.q) AS q, any_value(t.p_env) AS p_env,
    any_value(t.p_all) AS p_all, count(*) AS rows, count(v.v) AS n, sum(v.v) AS total,
    count(*) FILTER (v.v < t.p_env) AS below_env, count(*) FILTER (v.v = t.p_env) AS at_env,
    coalesce(max(v.v, $k) FILTER (v.v < t.p_env), []) AS low_env,
    coalesce(min(v.v, $k) FILTER (v.v > t.p_env), []) AS high_env,
    count(*) FILTER (v.v < t.p_all) AS below_all, count(*) FILTER (v.v = t.p_all) AS at_all,
    coalesce(max(v.v, $k) FILTER (v.v < t.p_all), []) AS low_all,
    coalesce(min(v.v, $k) FILTER (v.v > t.p_all), []) AS high_all
FROM _quantile_values($run) AS v
JOIN targets AS t ON t.metric = v.metric AND t.environment IS NOT DISTINCT FROM v.environment
GROUP BY t.metric, t.environment, t.slot;
CREATE OR REPLACE TABLE _quantile_windows_mat AS
WITH sides AS (
    SELECT false AS all_environments, environment, metric, slot, q, rows, n, total,
           below_env AS below_p, at_env AS at_p, p_env AS p, low_env AS low, high_env AS high
    FROM _qw_parts
    UNION ALL
    SELECT true, NULL, t.metric, t.slot, t.q, coalesce(sum(p.rows), 0), coalesce(sum(p.n), 0), sum(p.total),
           coalesce(sum(p.below_all), 0), coalesce(sum(p.at_all), 0), t.p,
           coalesce(list_slice(list_reverse_sort(flatten(list(p.low_all))), 1, $k), []),
           coalesce(list_slice(list_sort(flatten(list(p.high_all))), 1, $k), [])
    FROM _qw_targets AS t
    LEFT JOIN _qw_parts AS p ON p.metric = t.metric AND p.slot = t.slot
    WHERE t.all_environments
    GROUP BY t.metric, t.slot, t.q, t.p
),
bounded AS (  -- a side with $k values may not hold all of its extreme value's copies: that value is the bound
    SELECT *,
        CASE WHEN len(low) >= $k THEN list_min(low) END AS lo,
        CASE WHEN len(high) >= $k THEN list_max(high) END AS hi
    FROM sides
),
kept AS (  -- each side's values strictly inside the bounds
    SELECT *,
        list_filter(low, lambda x: lo IS NULL OR x > lo) AS low_in,
        list_filter(high, lambda x: hi IS NULL OR x < hi) AS high_in
    FROM bounded
),
inside AS (  -- the values strictly between lo and hi, with their copies
    SELECT all_environments, environment, metric, slot, v, count(*) AS c
    FROM (SELECT all_environments, environment, metric, slot, unnest(low_in || high_in) AS v FROM kept)
    GROUP BY ALL
    UNION ALL
    SELECT all_environments, environment, metric, slot, p, at_p FROM kept WHERE at_p > 0
)
SELECT
    b.all_environments, b.environment, b.metric, b.slot, any_value(b.q) AS q,
    any_value(b.rows)::BIGINT AS rows, any_value(b.n)::BIGINT AS n, any_value(b.total) AS total,
    any_value(b.lo) AS lo, any_value(b.hi) AS hi,
    any_value(b.below_p - len(b.low_in))::BIGINT AS below,
    coalesce(list(i.v ORDER BY i.v) FILTER (i.v IS NOT NULL), []) AS window_values,
    coalesce(list(i.c::BIGINT ORDER BY i.v) FILTER (i.v IS NOT NULL), []) AS window_counts
FROM kept AS b
LEFT JOIN inside AS i
    ON i.all_environments = b.all_environments AND i.environment IS NOT DISTINCT FROM b.environment
   AND i.metric = b.metric AND i.slot = b.slot
GROUP BY b.all_environments, b.environment, b.metric, b.slot;
