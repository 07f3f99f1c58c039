-- Rebuild one changed run's stage tables (steps first: stages read them).
DELETE FROM _rollout_steps_mat WHERE run_id = $run;
INSERT INTO _rollout_steps_mat SELECT $run, * FROM _rollout_steps_src($run);
DELETE FROM _rollout_stages_mat WHERE run_id = $run;
INSERT INTO _rollout_stages_mat SELECT $run, * FROM _rollout_stages_src($run);
