-- Materialized readers keep the two joined views in native tables, rebuilt per run when its segments change:
-- every analysis reads turns and rollouts, and re-joining millions of rows per query would cost seconds.
CREATE TABLE _rollouts_mat AS SELECT * FROM _rollouts_src LIMIT 0;
CREATE OR REPLACE VIEW rollouts AS SELECT * FROM _rollouts_mat;
-- Turns keep the step that consumed their rollout (kept current with the rollout's), for _turns_stepped.
CREATE TABLE _turns_mat AS SELECT * FROM _turns_stepped('') LIMIT 0;
CREATE OR REPLACE VIEW turns AS SELECT * EXCLUDE (step) FROM _turns_mat;
CREATE OR REPLACE MACRO _turns_stepped(run) AS TABLE SELECT * FROM _turns_mat WHERE run_id = run;
-- Train steps too: every step assignment reads all of a run's steps, which must not cost a scan of the run.
CREATE TABLE _train_steps_mat AS SELECT * FROM _train_steps_src LIMIT 0;
CREATE OR REPLACE VIEW train_steps AS SELECT * FROM _train_steps_mat;
-- The analyses' per-run stage tables (queries/sql/analyses/macros), kept the same way.
CREATE TABLE _rollout_steps_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_steps_src('') LIMIT 0;
CREATE OR REPLACE MACRO rollout_steps(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_steps_mat WHERE run_id = run;
CREATE TABLE _rollout_stages_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_stages_src('') LIMIT 0;
CREATE OR REPLACE MACRO rollout_stages(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_stages_mat WHERE run_id = run;
-- The compute terms' tables (queries/sql/analyses/macros/04_compute_work.sql), kept the same way: the work
-- rows with their steps, and FLOP sums and busy islands per step. compute_terms sweeps islands, not spans.
CREATE TABLE _work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _compute_work_src('') LIMIT 0;
CREATE OR REPLACE MACRO _compute_work(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _work_mat WHERE run_id = run;
CREATE TABLE _step_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_sums_src('', NULL) LIMIT 0;
CREATE OR REPLACE MACRO _step_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _step_sums_mat WHERE run_id = run;
CREATE TABLE _step_islands_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_islands_src('', NULL) LIMIT 0;
CREATE OR REPLACE MACRO _busy_intervals(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _step_islands_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _pending_work(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _work_mat WHERE run_id = run AND step IS NULL;
-- The work around each rollout (queries/sql/analyses/macros/05_rollout_work.sql).
CREATE TABLE _rollout_work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_work_staged('') LIMIT 0;
CREATE OR REPLACE MACRO _rollout_work(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_work_mat WHERE run_id = run;
-- The turns' sums per step and key (queries/sql/analyses/macros/06_turn_sums.sql).
CREATE TABLE _turn_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _turn_sums_src('', NULL) LIMIT 0;
CREATE OR REPLACE MACRO _turn_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _turn_sums_mat WHERE run_id = run;
