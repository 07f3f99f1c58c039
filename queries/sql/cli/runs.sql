SELECT run_id, spans, rollouts, train_steps, first_time, last_time, processes
FROM runs
ORDER BY first_time;
