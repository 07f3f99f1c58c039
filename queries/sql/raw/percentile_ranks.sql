-- The ranks each of run_percentiles' percentiles needs (queries/derive.py, before percentiles_from_bins.sql):
-- per group (the run: all_environments; each environment), kind and fraction q, the ranks floor and ceil of
-- (n - 1) * q (as quantile_cont takes them), each with the bin holding it (from the cumulative counts of
-- _bins: kind, environment, bin, n; percentile_bins.sql) and its offset within that bin.
CREATE OR REPLACE TEMP TABLE _wanted AS
WITH bins AS (
    SELECT *, sum(n) OVER (PARTITION BY all_environments, environment, kind ORDER BY bin) - n AS below,
           sum(n) OVER (PARTITION BY all_environments, environment, kind) AS total
    FROM (
        SELECT GROUPING(environment) = 1 AS all_environments, environment, kind, bin, sum(n) AS n
        FROM _bins GROUP BY GROUPING SETS ((kind, bin), (kind, environment, bin))
    )
),
fractions(kind, i, q) AS (
    VALUES ('tokens', 1, 0.5::DOUBLE), ('tokens', 2, 0.9::DOUBLE), ('tokens', 3, 0.99::DOUBLE),
           ('seconds', 1, 0.5::DOUBLE), ('seconds', 2, 0.9::DOUBLE), ('seconds', 3, 0.99::DOUBLE),
           ('latency', 1, 0.5::DOUBLE)
),
ranks AS (
    SELECT g.all_environments, g.environment, g.kind, f.i, CAST(g.total - 1 AS DOUBLE) * f.q AS rn
    FROM (SELECT DISTINCT all_environments, environment, kind, total FROM bins) AS g
    JOIN fractions AS f USING (kind)
)
SELECT r.all_environments, r.environment, r.kind, r.i, r.rn, CAST(floor(r.rn) AS BIGINT) AS frn,
       CAST(ceil(r.rn) AS BIGINT) AS crn, x.pos, b.bin, x.pos - b.below AS offset
FROM ranks AS r, unnest([CAST(floor(r.rn) AS BIGINT), CAST(ceil(r.rn) AS BIGINT)]) AS x(pos)
JOIN bins AS b
  ON b.all_environments = r.all_environments AND b.environment IS NOT DISTINCT FROM r.environment
 AND b.kind = r.kind AND x.pos >= b.below AND x.pos < b.below + b.n;
