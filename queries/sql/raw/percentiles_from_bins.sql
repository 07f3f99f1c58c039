-- run_percentiles as both derivations take them (queries/derive.py): the exact percentiles _run_percentiles_src
-- defines (quantile_cont: the values at ranks floor and ceil of (n - 1) * q, interpolated linearly, lo * (1 - d)
-- + hi * d, which may differ from DuckDB's in the last bit), found through the bin counts rather than by sorting
-- every value, so that a catch-up need not sort the run's every value: each rank's bin and
-- offset (_wanted, percentile_ranks.sql), then only the values of those bins read from the per-value tables
-- (_rollout_tails_mat, _turn_latency_mat) and ranked within their bin. total_s and which groups have a row
-- come from the same aggregates as the definition's.
-- _bin_ranges (kind, lo, hi): each needed bin as a range of values, widened a little so that rounding in log2
-- cannot leave a value out (derive.py); the scans compare values against them instead of binning every value,
-- and the bin itself is checked on what passes.
CREATE OR REPLACE TEMP TABLE _picked AS
WITH vals AS (
    SELECT 'tokens' AS kind, environment, CAST(generated AS DOUBLE) AS v FROM _rollout_tails_mat
    WHERE generated IS NOT NULL
    UNION ALL
    SELECT 'seconds', environment, duration_s FROM _rollout_tails_mat WHERE duration_s IS NOT NULL
    UNION ALL
    SELECT 'latency', environment, duration_s FROM _turn_latency_mat WHERE duration_s IS NOT NULL
)
SELECT v.kind, v.environment, v.v, _percentile_bin(v.v) AS bin
FROM vals AS v
JOIN _bin_ranges AS r ON r.kind = v.kind AND v.v BETWEEN r.lo AND r.hi
WHERE (v.kind, _percentile_bin(v.v)) IN (SELECT kind, bin FROM _wanted);
CREATE OR REPLACE TEMP TABLE _merged AS
WITH ranked AS (
    SELECT true AS all_environments, NULL::VARCHAR AS environment, kind, bin, v,
           row_number() OVER (PARTITION BY kind, bin ORDER BY v) - 1 AS offset
    FROM _picked
    UNION ALL
    SELECT false, environment, kind, bin, v, row_number() OVER (PARTITION BY kind, environment, bin ORDER BY v) - 1
    FROM _picked
),
valued AS (
    SELECT w.all_environments, w.environment, w.kind, w.i,
           any_value(r.v) FILTER (w.pos = w.frn) AS lo, any_value(r.v) FILTER (w.pos = w.crn) AS hi,
           any_value(w.rn) AS rn, any_value(w.frn) AS frn, any_value(w.crn) AS crn
    FROM _wanted AS w
    JOIN ranked AS r
      ON r.all_environments = w.all_environments AND r.environment IS NOT DISTINCT FROM w.environment
     AND r.kind = w.kind AND r.bin = w.bin AND r.offset = w.offset
    GROUP BY w.all_environments, w.environment, w.kind, w.i
),
quantiles AS (
    SELECT all_environments, environment,
           list(CASE WHEN frn = crn THEN lo ELSE lo * (1 - (rn - frn)) + hi * (rn - frn) END ORDER BY i)
               FILTER (kind = 'tokens') AS tokens,
           list(CASE WHEN frn = crn THEN lo ELSE lo * (1 - (rn - frn)) + hi * (rn - frn) END ORDER BY i)
               FILTER (kind = 'seconds') AS seconds,
           any_value(CASE WHEN frn = crn THEN lo ELSE lo * (1 - (rn - frn)) + hi * (rn - frn) END)
               FILTER (kind = 'latency') AS latency
    FROM valued GROUP BY all_environments, environment
),
tails AS (
    SELECT GROUPING(environment) = 1 AS all_environments, environment, sum(duration_s) AS total_s
    FROM _rollout_tails_mat GROUP BY GROUPING SETS ((), (environment))
),
latency AS (
    SELECT GROUPING(environment) = 1 AS all_environments, environment
    FROM _turn_latency_mat GROUP BY GROUPING SETS ((), (environment))
)
SELECT
    $run AS run_id,
    coalesce(t.all_environments, l.all_environments) AS all_environments,
    coalesce(t.environment, l.environment) AS environment,
    CASE WHEN t.all_environments IS NOT NULL THEN q.tokens END AS tokens,
    CASE WHEN t.all_environments IS NOT NULL THEN q.seconds END AS seconds,
    t.total_s,
    q.latency AS turn_latency_p50_s
FROM tails AS t
FULL JOIN latency AS l
    ON l.all_environments = t.all_environments AND l.environment IS NOT DISTINCT FROM t.environment
LEFT JOIN quantiles AS q
    ON q.all_environments = coalesce(t.all_environments, l.all_environments)
   AND q.environment IS NOT DISTINCT FROM coalesce(t.environment, l.environment);
