-- The answers whose percentile lies between two kept values (v0, v1) of its window, with the fraction of the
-- way between them (refresh.refresh_quantiles interpolates each as DuckDB does).
SELECT all_environments, environment, metric, slot, v0, v1, h - floor(h) AS fraction
FROM _qw_answers
WHERE covered AND n > 0 AND j0 <> j1;
