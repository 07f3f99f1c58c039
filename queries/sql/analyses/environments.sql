-- The environments the run's rollouts name: the choices of the environment filter.
SELECT DISTINCT environment
FROM _funnel_sums($run_id)
WHERE environment IS NOT NULL
ORDER BY environment
