-- Materialized readers keep the two joined views in native tables, rebuilt per run when its segments change:
-- every analysis reads turns and rollouts, and re-joining millions of rows per query would cost seconds.
CREATE TABLE _rollouts_mat AS SELECT * FROM _rollouts_src LIMIT 0;
CREATE OR REPLACE VIEW rollouts AS SELECT * FROM _rollouts_mat;
CREATE TABLE _turns_mat AS SELECT * FROM _turns_src LIMIT 0;
CREATE OR REPLACE VIEW turns AS SELECT * FROM _turns_mat;
-- The analyses' per-run stage tables (queries/sql/analyses/macros), kept the same way.
CREATE TABLE _rollout_steps_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_steps_src('') LIMIT 0;
CREATE OR REPLACE MACRO rollout_steps(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_steps_mat WHERE run_id = run;
CREATE TABLE _rollout_stages_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_stages_src('') LIMIT 0;
CREATE OR REPLACE MACRO rollout_stages(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_stages_mat WHERE run_id = run;
