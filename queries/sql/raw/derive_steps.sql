-- After derive_delta.sql: recompute the compute tables of the steps it touched ($steps, from scope_steps.sql)
-- from the run's materialized tables. A step's islands merge every interval of the step: a step is redone whole.
DELETE FROM _step_sums_mat WHERE run_id = $run AND list_contains($steps, step);
INSERT INTO _step_sums_mat
SELECT $run, * FROM _step_sums_src($run, $steps);
DELETE FROM _step_islands_mat WHERE run_id = $run AND list_contains($steps, step);
INSERT INTO _step_islands_mat
SELECT $run, * FROM _step_islands_src($run, $steps);
