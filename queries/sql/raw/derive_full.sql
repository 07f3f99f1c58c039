-- Derive one run's tables (store/derived.py lists them) from every span of the run, into the empty tables of
-- derived_tables.sql; queries/derive.py runs it over the run's raw segments and writes each table as Parquet.
-- Order matters: turns join rollouts and take their steps, stages read steps, the compute tables read steps
-- and work, the turn sums read turns and the per-rollout work.
INSERT INTO _rollouts_mat SELECT * FROM _rollouts_src WHERE run_id = $run;
INSERT INTO _train_steps_mat SELECT * FROM _train_steps_src WHERE run_id = $run;
INSERT INTO _rollout_steps_mat SELECT $run, * FROM _rollout_steps_src($run);
INSERT INTO _turns_mat
SELECT t.*, c.step FROM _turns_src AS t
LEFT JOIN _rollout_steps_mat AS c ON c.run_id = $run AND c.rollout_id = t.rollout_id
WHERE t.run_id = $run;
INSERT INTO _rollout_stages_mat SELECT $run, * FROM _rollout_stages_src($run);
INSERT INTO _work_mat SELECT $run, * FROM _compute_work_src($run);
INSERT INTO _step_sums_mat SELECT $run, * FROM _step_sums_src($run, NULL);
INSERT INTO _step_islands_mat SELECT $run, * FROM _step_islands_src($run, NULL);
INSERT INTO _compute_busy_mat SELECT $run, * FROM _compute_busy_src($run);
INSERT INTO _rollout_work_mat SELECT $run, * FROM _rollout_work_staged($run);
INSERT INTO _turn_sums_mat SELECT $run, * FROM _turn_sums_src($run, NULL);
-- The per-step aggregates (macros/07) read the tables above.
INSERT INTO _funnel_sums_mat SELECT $run, * FROM _funnel_sums_src($run);
INSERT INTO _staleness_sums_mat SELECT $run, * FROM _staleness_sums_src($run);
INSERT INTO _rollout_sums_mat SELECT $run, * FROM _rollout_sums_src($run);
INSERT INTO _rollout_tails_mat SELECT $run, * FROM _rollout_tails_src($run);
INSERT INTO _turn_latency_mat SELECT $run, * FROM _turn_latency_src($run);
INSERT INTO _prefill_sums_mat SELECT $run, * FROM _prefill_sums_src($run);
INSERT INTO _prefill_split_mat SELECT $run, * FROM _prefill_split_src($run);
INSERT INTO _spec_sums_mat SELECT $run, * FROM _spec_sums_src($run);
INSERT INTO _lint_sums_mat SELECT $run, * FROM _lint_sums_src($run);
INSERT INTO _generation_sums_mat SELECT $run, * FROM _generation_sums_src($run);
INSERT INTO _reward_sums_mat SELECT $run, * FROM _reward_sums_src($run);
INSERT INTO _process_activity_mat SELECT $run, * FROM _process_activity_src($run);
INSERT INTO _open_rollouts_mat SELECT $run, * FROM _open_rollouts_src($run);
INSERT INTO _scoring_mat SELECT $run, * FROM _scoring_src($run);
-- The run's percentiles read the per-value tables above (rollout tails, turn latency, scoring calls).
INSERT INTO _run_percentiles_mat SELECT $run, * FROM _run_percentiles_src($run);
INSERT INTO _trainer_goodput_mat SELECT $run, * FROM _trainer_goodput_src($run);
INSERT INTO _rollout_goodput_mat SELECT $run, * FROM _rollout_goodput_src($run);
INSERT INTO _device_turn_sums_mat SELECT $run, * FROM _device_turn_sums_src($run);
INSERT INTO _wasted_sums_mat SELECT $run, * FROM _wasted_sums_src($run);
-- Is it learning and the advisor's per-step tables (macros/09_learning.sql) read the tables above.
INSERT INTO _reward_counts_mat SELECT $run, * FROM _reward_counts_src($run);
INSERT INTO _zero_signal_sums_mat SELECT $run, * FROM _zero_signal_sums_src($run);
INSERT INTO _mismatch_sums_mat SELECT $run, * FROM _mismatch_sums_src($run);
INSERT INTO _staleness_timing_mat SELECT $run, * FROM _staleness_timing_src($run);
INSERT INTO _stale_bias_sums_mat SELECT $run, * FROM _stale_bias_sums_src($run);
INSERT INTO _advice_group_sums_mat SELECT $run, * FROM _advice_group_sums_src($run);
INSERT INTO _judge_sums_mat SELECT $run, * FROM _judge_sums_src($run);
INSERT INTO _advice_spec_sums_mat SELECT $run, * FROM _advice_spec_sums_src($run);
-- Transcript flags (macros/11_transcript_flags.sql) read the run's messages beside its tool spans.
INSERT INTO _rollout_flags_mat SELECT $run, * FROM _rollout_flags_src($run);
INSERT INTO _flag_sums_mat SELECT $run, * FROM _flag_sums_src($run);
