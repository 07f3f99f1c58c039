-- The derived tables (store/derived.py declares them), empty, typed by their definitions in queries/sql/views and
-- queries/sql/analyses/macros. queries/derive.py fills them from one run's raw segments (derive_full.sql) and
-- writes them to the store as Parquet; a reader keeps these empty ones for runs with no derived state.
-- The two joined views: every analysis reads turns and rollouts, and re-joining millions of spans per query
-- would cost seconds.
CREATE TABLE _rollouts_mat AS SELECT * FROM _rollouts_src LIMIT 0;
-- Turns keep the step that consumed their rollout, for _turns_stepped.
CREATE TABLE _turns_mat AS SELECT * FROM _turns_stepped('') LIMIT 0;
-- Train steps: every step assignment reads all of a run's steps, which must not cost a scan of the run.
CREATE TABLE _train_steps_mat AS SELECT * FROM _train_steps_src LIMIT 0;
-- The analyses' per-run stage tables (queries/sql/analyses/macros).
CREATE TABLE _rollout_steps_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_steps_src('') LIMIT 0;
CREATE TABLE _rollout_stages_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_stages_src('') LIMIT 0;
-- The compute terms' tables (queries/sql/analyses/macros/04_compute_work.sql): the work
-- rows with their steps, and FLOP sums and busy islands per step.
CREATE TABLE _work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _compute_work_src('') LIMIT 0;
CREATE TABLE _step_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_sums_src('', NULL) LIMIT 0;
CREATE TABLE _step_islands_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _step_islands_src('', NULL) LIMIT 0;
-- Each process's busy time per step or run, per environment or over all: compute_terms reads no intervals.
CREATE TABLE _compute_busy_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _compute_busy_src('') LIMIT 0;
-- The work around each rollout (queries/sql/analyses/macros/05_rollout_work.sql).
CREATE TABLE _rollout_work_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_work_staged('') LIMIT 0;
-- The turns' sums per step and key (queries/sql/analyses/macros/06_turn_sums.sql).
CREATE TABLE _turn_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _turn_sums_src('', NULL) LIMIT 0;
-- The per-step aggregates every analysis reads (queries/sql/analyses/macros/07_step_aggregates.sql).
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
CREATE TABLE _run_percentiles_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _run_percentiles_src('') LIMIT 0;
-- Is it stuck (queries/sql/analyses/macros/08_health.sql): liveness, scoring latency and goodput.
CREATE TABLE _process_activity_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _process_activity_src('') LIMIT 0;
CREATE TABLE _open_rollouts_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _open_rollouts_src('') LIMIT 0;
CREATE TABLE _scoring_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _scoring_src('') LIMIT 0;
CREATE TABLE _trainer_goodput_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _trainer_goodput_src('') LIMIT 0;
CREATE TABLE _rollout_goodput_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_goodput_src('') LIMIT 0;
CREATE TABLE _device_turn_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _device_turn_sums_src('') LIMIT 0;
CREATE TABLE _wasted_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _wasted_sums_src('') LIMIT 0;
-- Is it learning, and the advisor's per-step tables (queries/sql/analyses/macros/09_learning.sql).
CREATE TABLE _reward_counts_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _reward_counts_src('') LIMIT 0;
CREATE TABLE _zero_signal_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _zero_signal_sums_src('') LIMIT 0;
CREATE TABLE _mismatch_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _mismatch_sums_src('') LIMIT 0;
CREATE TABLE _staleness_timing_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _staleness_timing_src('') LIMIT 0;
CREATE TABLE _stale_bias_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _stale_bias_sums_src('') LIMIT 0;
CREATE TABLE _advice_group_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _advice_group_sums_src('') LIMIT 0;
CREATE TABLE _judge_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _judge_sums_src('') LIMIT 0;
CREATE TABLE _advice_spec_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _advice_spec_sums_src('') LIMIT 0;
-- Transcript flags (queries/sql/analyses/macros/11_transcript_flags.sql): per rollout, from its messages, and
-- per step; the only tables a derivation reads message text for.
CREATE TABLE _rollout_flags_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _rollout_flags_src('') LIMIT 0;
CREATE TABLE _flag_sums_mat AS SELECT NULL::VARCHAR AS run_id, * FROM _flag_sums_src('') LIMIT 0;
