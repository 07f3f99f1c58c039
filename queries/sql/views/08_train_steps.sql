-- Optimiser steps; policy_version is the version the step produced; the train_* signals are what the trainer
-- logged about the update (entropy, KL to the reference, the update's own KL, clip fraction, grad norm, lr).
-- _train_steps_src is the definition; a reader reads it from the store's derived table (queries/tables.py).
CREATE OR REPLACE VIEW _train_steps_src AS
SELECT
    run_id, train_step, policy_version, train_samples, train_tokens, train_wait_s, train_loss,
    train_entropy, train_kl, train_policy_kl, train_clip_fraction, train_grad_norm, train_learning_rate,
    start_time, end_time, duration_s, start_ns, end_ns, status_code,
    service_name, instance_id, role, devices, model_name, model_parameters, trace_id, span_id, attributes
FROM spans
WHERE name = 'rl.train_step';
CREATE OR REPLACE VIEW train_steps AS SELECT * FROM _train_steps_src;
