-- The environments the run's rollouts name: the choices of the environment filter.
SELECT DISTINCT environment
FROM rollouts
WHERE run_id = $run_id AND environment IS NOT NULL
ORDER BY environment
