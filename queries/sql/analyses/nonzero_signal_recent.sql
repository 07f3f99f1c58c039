-- The nonzero-signal rate over the run's latest $window consuming train steps, or over every rollout while no
-- step has consumed any (steps = 0): the figure the nonzero-signal check compares with its threshold
-- (docs/report.md). scored_in_groups as in funnel.sql: 0 means no group can show a signal yet.
-- Counted from the rollouts per step and funnel outcome kept ahead (_funnel_sums, macros/07).
WITH latest AS (
    SELECT DISTINCT step FROM _funnel_sums($run_id) WHERE step IS NOT NULL ORDER BY step DESC LIMIT $window
),
kept AS (
    SELECT * FROM _funnel_sums($run_id)
    WHERE step IN (SELECT step FROM latest) OR NOT EXISTS (SELECT 1 FROM latest)
)
SELECT
    (SELECT count(*) FROM latest) AS steps,
    coalesce(sum(rollouts) FILTER (scored), 0)::BIGINT AS scored,
    coalesce(sum(rollouts) FILTER (nonzero_signal), 0)::BIGINT AS nonzero_signal,
    coalesce(sum(rollouts) FILTER (in_groups), 0)::BIGINT AS scored_in_groups,
    coalesce(sum(rollouts) FILTER (nonzero_signal), 0) / nullif(sum(rollouts) FILTER (scored), 0)
        AS nonzero_signal_rate
FROM kept
