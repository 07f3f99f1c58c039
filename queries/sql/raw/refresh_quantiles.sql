-- run_percentiles after an incremental catch-up, from the previous state's windows (_qw_old, made by
-- quantile_windows.sql: read there what a window holds) and the values the catch-up removes and adds
-- (_qd_tails, _qd_latency, _qd_scoring: the scoped steps' rows of rollout_tails, turn_latency and scoring, sign
-- -1 as they were and +1 as they are now), not from every value of the run. Each window's counts move by those
-- values, and the values inside it gain and lose theirs; a percentile is read from its window when both ranks it
-- interpolates between still fall inside; quantile_results.sql says whether every one did ("kept"); if not,
-- queries/refresh.py takes the percentiles and the windows again over every value (quantile_windows.sql).
-- A percentile is quantile_cont's: the value at rank h = (n - 1) * q of the n sorted values, interpolated
-- between ranks floor(h) and ceil(h). Where it falls between two values (v0, v1), queries/refresh.py has
-- DuckDB's quantile_cont interpolate them, h - floor(h) of the way, so that the last bit is DuckDB's too;
-- then quantile_results.sql makes run_percentiles' rows and the new windows.
CREATE OR REPLACE TEMP TABLE _qd AS  -- each removed (-1) or added (+1) value by metric, NULL values included
SELECT 'tokens' AS metric, environment, generated::DOUBLE AS v, sign FROM _qd_tails
UNION ALL
SELECT 'seconds' AS metric, environment, duration_s AS v, sign FROM _qd_tails
UNION ALL
SELECT 'latency' AS metric, environment, duration_s AS v, sign FROM _qd_latency
UNION ALL
SELECT kind || '_s' AS metric, environment, duration_s AS v, sign FROM _qd_scoring;
-- The previous windows, and an empty one (no bound: it holds every value) for each environment whose first
-- values of a metric arrive now (turns whose rollout has not arrived yet have no environment, for instance):
-- all of its values are in _qd.
CREATE OR REPLACE TEMP TABLE _qw_base AS
SELECT * FROM _qw_old
UNION ALL BY NAME
SELECT
    false AS all_environments, d.environment, a.metric, a.slot, a.q, 0::BIGINT AS rows, 0::BIGINT AS n,
    NULL::DOUBLE AS total, NULL::DOUBLE AS lo, NULL::DOUBLE AS hi, 0::BIGINT AS below,
    []::DOUBLE[] AS window_values, []::BIGINT[] AS window_counts
FROM (SELECT DISTINCT metric, environment FROM _qd) AS d
JOIN _qw_old AS a ON a.all_environments AND a.metric = d.metric
WHERE NOT EXISTS (
    SELECT 1 FROM _qw_old AS w
    WHERE NOT w.all_environments AND w.metric = d.metric AND w.environment IS NOT DISTINCT FROM d.environment
);
CREATE OR REPLACE TEMP TABLE _qw_moved AS  -- each window's counts after the catch-up
SELECT
    w.all_environments, w.environment, w.metric, w.slot, w.q, w.lo, w.hi,
    w.rows + coalesce(sum(d.sign), 0) AS rows,
    w.n + coalesce(sum(d.sign) FILTER (d.v IS NOT NULL), 0) AS n,
    coalesce(w.total, 0) + coalesce(sum(d.sign * d.v), 0) AS total,
    w.below + coalesce(sum(d.sign) FILTER (d.v <= w.lo), 0) AS below
FROM _qw_base AS w
LEFT JOIN _qd AS d
    ON d.metric = w.metric AND (w.all_environments OR d.environment IS NOT DISTINCT FROM w.environment)
GROUP BY w.all_environments, w.environment, w.metric, w.slot, w.q, w.lo, w.hi, w.rows, w.n, w.total, w.below;
CREATE OR REPLACE TEMP TABLE _qw_inside AS  -- the values strictly between lo and hi, and their copies, now
SELECT all_environments, environment, metric, slot, v, sum(c) AS c
FROM (
    SELECT all_environments, environment, metric, slot, unnest(window_values) AS v, unnest(window_counts) AS c
    FROM _qw_base
    UNION ALL
    SELECT w.all_environments, w.environment, w.metric, w.slot, d.v, d.sign
    FROM _qw_base AS w
    JOIN _qd AS d
        ON d.metric = w.metric AND (w.all_environments OR d.environment IS NOT DISTINCT FROM w.environment)
    WHERE d.v IS NOT NULL AND (w.lo IS NULL OR d.v > w.lo) AND (w.hi IS NULL OR d.v < w.hi)
)
GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE _qw_ranked AS  -- each value's first position in its window (0-based)
SELECT *, sum(c) OVER (PARTITION BY all_environments, environment, metric, slot ORDER BY v) - c AS first
FROM _qw_inside
WHERE c > 0;
CREATE OR REPLACE TEMP TABLE _qw_answers AS
WITH ranks AS (  -- the two ranks each percentile lies between, as positions in its window
    SELECT
        *, (n - 1)::DOUBLE * q AS h,
        CAST(floor((n - 1)::DOUBLE * q) AS BIGINT) - below AS j0,
        CAST(ceil((n - 1)::DOUBLE * q) AS BIGINT) - below AS j1
    FROM _qw_moved
),
valued AS (
    SELECT
        r.*, coalesce(sum(k.c), 0) AS held,
        any_value(k.v) FILTER (r.j0 >= k.first AND r.j0 < k.first + k.c) AS v0,
        any_value(k.v) FILTER (r.j1 >= k.first AND r.j1 < k.first + k.c) AS v1
    FROM ranks AS r
    LEFT JOIN _qw_ranked AS k
        ON k.all_environments = r.all_environments AND k.environment IS NOT DISTINCT FROM r.environment
       AND k.metric = r.metric AND k.slot = r.slot
    GROUP BY ALL
)
SELECT *, n = 0 OR (j0 >= 0 AND j1 < held) AS covered, CASE WHEN n > 0 AND j0 = j1 THEN v0 END AS value
FROM valued;
