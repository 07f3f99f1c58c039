-- The run's staleness bound: the largest rl.staleness.bound its processes declared (attach(staleness_bound=)),
-- known from the first rollout on, before any sample is consumed; NULL when none declared one.
SELECT max(bound) AS staleness_bound
FROM _staleness_sums($run_id)
