-- The first and last train step of the run: the bounds of the dashboard's step filter.
SELECT min(train_step) AS first_step, max(train_step) AS last_step
FROM train_steps
WHERE run_id = $run_id
