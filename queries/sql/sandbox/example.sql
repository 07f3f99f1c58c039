-- Rollouts and mean reward per run and environment: edit, then press Run.
SELECT run_id, environment, count(*) AS rollouts, avg(reward) AS mean_reward
FROM rollouts
GROUP BY run_id, environment
ORDER BY run_id, environment
