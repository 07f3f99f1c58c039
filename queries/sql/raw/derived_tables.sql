-- Generated from queries/tables.py by `make schemas`: edit the declarations there, not this file.
-- The derived tables, empty, typed by their definitions in queries/sql/views and queries/sql/analyses/macros.
-- A derivation fills them (derive_full.sql) and writes them to the store as Parquet; a reader keeps these
-- empty ones for runs with no derived state.
CREATE TABLE _rollouts_mat AS SELECT * FROM _rollouts_src LIMIT 0;
CREATE TABLE _train_steps_mat AS SELECT * FROM _train_steps_src LIMIT 0;
CREATE TABLE _rollout_steps_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_steps_src('') LIMIT 0;
CREATE TABLE _turns_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _turns_stepped_src('') LIMIT 0;
CREATE TABLE _rollout_stages_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_stages_src('') LIMIT 0;
CREATE TABLE _work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _compute_work_src('') LIMIT 0;
CREATE TABLE _step_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_sums_src('', NULL) LIMIT 0;
CREATE TABLE _step_islands_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_islands_src('', NULL) LIMIT 0;
CREATE TABLE _compute_busy_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _compute_busy_src('') LIMIT 0;
CREATE TABLE _rollout_work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_work_staged('') LIMIT 0;
CREATE TABLE _turn_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _turn_sums_src('', NULL) LIMIT 0;
CREATE TABLE _funnel_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _funnel_sums_src('') LIMIT 0;
CREATE TABLE _staleness_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _staleness_sums_src('') LIMIT 0;
CREATE TABLE _rollout_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_sums_src('') LIMIT 0;
CREATE TABLE _rollout_tails_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_tails_src('') LIMIT 0;
CREATE TABLE _turn_latency_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _turn_latency_src('') LIMIT 0;
CREATE TABLE _prefill_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _prefill_sums_src('') LIMIT 0;
CREATE TABLE _prefill_split_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _prefill_split_src('') LIMIT 0;
CREATE TABLE _spec_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _spec_sums_src('') LIMIT 0;
CREATE TABLE _lint_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _lint_sums_src('') LIMIT 0;
CREATE TABLE _generation_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _generation_sums_src('') LIMIT 0;
CREATE TABLE _reward_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _reward_sums_src('') LIMIT 0;
CREATE TABLE _process_activity_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _process_activity_src('') LIMIT 0;
CREATE TABLE _open_rollouts_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _open_rollouts_src('') LIMIT 0;
CREATE TABLE _scoring_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _scoring_src('') LIMIT 0;
CREATE TABLE _run_percentiles_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _run_percentiles_src('') LIMIT 0;
CREATE TABLE _trainer_goodput_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _trainer_goodput_src('') LIMIT 0;
CREATE TABLE _rollout_goodput_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_goodput_src('') LIMIT 0;
CREATE TABLE _device_turn_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _device_turn_sums_src('') LIMIT 0;
CREATE TABLE _wasted_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _wasted_sums_src('') LIMIT 0;
CREATE TABLE _reward_counts_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _reward_counts_src('') LIMIT 0;
CREATE TABLE _reward_steps_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _reward_steps_src('') LIMIT 0;
CREATE TABLE _zero_signal_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _zero_signal_sums_src('') LIMIT 0;
CREATE TABLE _mismatch_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _mismatch_sums_src('') LIMIT 0;
CREATE TABLE _staleness_timing_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _staleness_timing_src('') LIMIT 0;
CREATE TABLE _stale_bias_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _stale_bias_sums_src('') LIMIT 0;
CREATE TABLE _advice_group_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _advice_group_sums_src('') LIMIT 0;
CREATE TABLE _judge_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _judge_sums_src('') LIMIT 0;
CREATE TABLE _advice_spec_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _advice_spec_sums_src('') LIMIT 0;
CREATE TABLE _rollout_flags_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_flags_src('') LIMIT 0;
CREATE TABLE _flag_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _flag_sums_src('') LIMIT 0;
