-- Rolling mean of per-step series: the dark line drawn over each pale per-step series on the dashboard and
-- the Overview's sparklines. At each point of a series (points in the order given, one per train step), the
-- mean of the series' figures at that point and at the $window − 1 points before it, fewer at the start;
-- missing figures are skipped, and a window holding none has no mean (NULL).
-- $series and $value are parallel lists, one entry per point: the series' name and its figure there.
WITH points AS (
    SELECT
        unnest($series) AS series,
        unnest($value)::DOUBLE AS value,
        generate_subscripts($series, 1) AS position
)
SELECT
    series,
    avg(value) OVER (
        PARTITION BY series ORDER BY position ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW
    ) AS rolling_mean
FROM points
ORDER BY position
