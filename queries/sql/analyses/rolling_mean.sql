-- Rolling mean of per-step series: the dark line drawn over each pale per-step series on the dashboard and
-- the Overview's sparklines. At each step of a series, the mean of the series' figures at that step and at the
-- $rolling_window − 1 steps before it (rows in step order), fewer at the start; missing figures are skipped,
-- and a window holding none has no mean (NULL). A series is one column of $rolling_columns over the rows of one
-- _series (one environment's steps when the analysis is split by step and environment, else every step); rows
-- of no step (rollouts not consumed yet) get a series of their own.
-- Not run alone: queries.analyses runs an analysis with its rolling mean as one statement,
--   WITH analysis AS (SELECT *, <series> AS _series, row_number() OVER () AS _position FROM (<the analysis>))
--   <this query>
-- so the figures and their rolling mean cost one query.
SELECT
    * EXCLUDE (_series, _position),
    avg(COLUMNS(lambda c: list_contains($rolling_columns, c))) OVER (
        PARTITION BY _series, step IS NULL
        ORDER BY step, _position
        ROWS BETWEEN $rolling_window - 1 PRECEDING AND CURRENT ROW
    ) AS '\0_rolling_mean'
FROM analysis
ORDER BY _position
