-- _steps(run): the run's train steps, one row per step. A data-parallel trainer records each step once per
-- process (TRL under accelerate or torchrun: every rank runs the same loop on its share of the batch, and the
-- TRL adapter records what each rank sees), so a step is the union of its rows: it starts at the first one's
-- start and ends at the last one's end; its data was ready when the last process had its share (ready_ns;
-- train_wait_s, the longest wait); its samples and tokens are the processes' sums; the version it produced the
-- highest recorded, its loss and the other signals the trainer logged (entropy, KL, clip fraction, grad norm,
-- learning rate) their mean. A step recorded once is its row as it was. What is counted per
-- process (the trainer's device-seconds, _work_rows_src) reads train_steps itself.
CREATE OR REPLACE MACRO _steps(run) AS TABLE
SELECT
    train_step,
    max(policy_version) AS policy_version,
    min(start_ns) AS start_ns,
    max(end_ns) AS end_ns,
    (max(end_ns) - min(start_ns)) / 1e9 AS duration_s,
    max(train_wait_s) AS train_wait_s,
    max(start_ns + CAST(round(coalesce(train_wait_s, 0) * 1e9) AS BIGINT)) AS ready_ns,
    sum(train_samples) AS train_samples,
    sum(train_tokens) AS train_tokens,
    avg(train_loss) AS train_loss,
    avg(train_entropy) AS train_entropy,
    avg(train_kl) AS train_kl,
    avg(train_policy_kl) AS train_policy_kl,
    avg(train_clip_fraction) AS train_clip_fraction,
    avg(train_grad_norm) AS train_grad_norm,
    avg(train_learning_rate) AS train_learning_rate
FROM train_steps
WHERE run_id = run AND train_step IS NOT NULL
GROUP BY train_step;
