-- The nonzero-signal rate over the run's latest $window consuming train steps, or over every rollout while no
-- step has consumed any (steps = 0): the figure the nonzero-signal check compares with its threshold
-- (docs/report.md). scored_in_groups as in funnel.sql: 0 means no group can show a signal yet.
WITH latest AS (
    SELECT DISTINCT step FROM rollout_stages($run_id) WHERE step IS NOT NULL ORDER BY step DESC LIMIT $window
),
kept AS (
    SELECT * FROM rollout_stages($run_id)
    WHERE step IN (SELECT step FROM latest) OR NOT EXISTS (SELECT 1 FROM latest)
)
SELECT
    (SELECT count(*) FROM latest) AS steps,
    count(*) FILTER (scored) AS scored,
    count(*) FILTER (nonzero_signal) AS nonzero_signal,
    count(*) FILTER (scored AND group_scored >= 2) AS scored_in_groups,
    count(*) FILTER (nonzero_signal) / nullif(count(*) FILTER (scored), 0) AS nonzero_signal_rate
FROM kept
