-- The trainer's decision about each rollout it saw: one row per training sample (several for a rollout compaction
-- made several, each with its sample_id).
CREATE OR REPLACE VIEW samples AS
SELECT
    run_id, rollout_id, sample_id, train_step, sample_decision, sample_staleness, sample_tokens,
    mismatch_kl, logprob_diff_mean, logprob_diff_max, importance_ratio_mean,
    start_time, end_time, start_ns, service_name, instance_id, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.sample';
