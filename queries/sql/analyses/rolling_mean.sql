-- Rolling mean of per-step series: the dark line drawn over each pale per-step series on the dashboard and
-- the Overview's sparklines. At each point of a series (one per train step, in step order), the mean of the
-- series' figures at that point and at the $window − 1 points before it, fewer at the start; missing figures
-- are skipped, and a window holding none has no mean (NULL).
-- Reads rolling_input(series, position, value): the figures an analysis already returned, one row per point,
-- registered on the cursor by queries.analyses.rolling_mean.
SELECT
    series,
    avg(value) OVER (
        PARTITION BY series ORDER BY position ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW
    ) AS rolling_mean
FROM rolling_input
ORDER BY series, position
