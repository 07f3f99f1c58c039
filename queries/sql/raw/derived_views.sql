-- Generated from queries/tables.py by `make schemas`: edit the declarations there, not this file.
-- What the analyses read, pointed at the derived tables _<table>_mat (a reader's views over the store's
-- derived Parquet files, or while deriving, the tables being filled) instead of their definitions.
CREATE OR REPLACE VIEW rollouts AS SELECT * FROM _rollouts_mat;
CREATE OR REPLACE VIEW train_steps AS SELECT * FROM _train_steps_mat;
CREATE OR REPLACE MACRO rollout_steps(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_steps_mat WHERE run_id = run;
CREATE OR REPLACE VIEW turns AS SELECT * EXCLUDE (step) FROM _turns_mat;
CREATE OR REPLACE MACRO _turns_stepped(run) AS TABLE SELECT * FROM _turns_mat WHERE run_id = run;
CREATE OR REPLACE MACRO rollout_stages(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_stages_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _compute_work(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _work_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _pending_work(run) AS TABLE SELECT * EXCLUDE (run_id) FROM _work_mat WHERE run_id = run AND step IS NULL;
CREATE OR REPLACE MACRO _step_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _step_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _busy_intervals(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _step_islands_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _compute_busy(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _compute_busy_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _rollout_work(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_work_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _turn_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _turn_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _funnel_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _funnel_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _staleness_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _staleness_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _rollout_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _rollout_tails(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_tails_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _turn_latency(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _turn_latency_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _prefill_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _prefill_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _prefill_split(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _prefill_split_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _spec_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _spec_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _lint_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _lint_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _generation_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _generation_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _reward_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _reward_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _process_activity(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _process_activity_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _open_rollouts(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _open_rollouts_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _scoring(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _scoring_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _run_percentiles(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _run_percentiles_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _trainer_goodput(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _trainer_goodput_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _rollout_goodput(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_goodput_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _device_turn_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _device_turn_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _wasted_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _wasted_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _reward_counts(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _reward_counts_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _reward_steps(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _reward_steps_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _zero_signal_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _zero_signal_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _mismatch_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _mismatch_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _staleness_timing(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _staleness_timing_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _stale_bias_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _stale_bias_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _advice_group_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _advice_group_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _judge_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _judge_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _advice_spec_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _advice_spec_sums_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _rollout_flags(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _rollout_flags_mat WHERE run_id = run;
CREATE OR REPLACE MACRO _flag_sums(run) AS TABLE
    SELECT * EXCLUDE (run_id) FROM _flag_sums_mat WHERE run_id = run;
