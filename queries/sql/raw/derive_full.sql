-- Rebuild one run's derived tables whole, from every span of the run: on a reader's first load, for a
-- run the reader has not seen, and when new spans change a run-wide input (derive_plan.sql).
-- Order matters: turns join rollouts, stages read steps, the compute tables read steps and work.
DELETE FROM _rollouts_mat WHERE run_id = $run;
INSERT INTO _rollouts_mat SELECT * FROM _rollouts_src WHERE run_id = $run;
DELETE FROM _turns_mat WHERE run_id = $run;
INSERT INTO _turns_mat SELECT * FROM _turns_src WHERE run_id = $run;
DELETE FROM _train_steps_mat WHERE run_id = $run;
INSERT INTO _train_steps_mat SELECT * FROM _train_steps_src WHERE run_id = $run;
DELETE FROM _rollout_steps_mat WHERE run_id = $run;
INSERT INTO _rollout_steps_mat SELECT $run, * FROM _rollout_steps_src($run);
DELETE FROM _rollout_stages_mat WHERE run_id = $run;
INSERT INTO _rollout_stages_mat SELECT $run, * FROM _rollout_stages_src($run);
DELETE FROM _work_mat WHERE run_id = $run;
INSERT INTO _work_mat SELECT $run, * FROM _compute_work_src($run);
DELETE FROM _step_sums_mat WHERE run_id = $run;
INSERT INTO _step_sums_mat SELECT $run, * FROM _step_sums_src($run, NULL);
DELETE FROM _step_islands_mat WHERE run_id = $run;
INSERT INTO _step_islands_mat SELECT $run, * FROM _step_islands_src($run, NULL);
DELETE FROM _rollout_work_mat WHERE run_id = $run;
INSERT INTO _rollout_work_mat SELECT $run, * FROM _rollout_work_src($run);
