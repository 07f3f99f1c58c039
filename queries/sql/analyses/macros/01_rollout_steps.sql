-- rollout_steps(run): one row per rollout with its consuming train step and staleness (docs/metrics.md,
-- "Staleness"), the train-inference mismatch its rl.sample recorded, plus the rollout's own columns, so analyses built on it need not join rollouts again.
-- A recorded rl.sample wins. A rollout compaction made several training samples has one rl.sample per sample
-- (rl.sample.id), all at its step: it is one rollout, consumed at its first step with that step's decision, its
-- sample_tokens the sum over its samples there (the mismatch is its first sample's,
-- the one that records it). In a run whose trainer records no rl.sample spans, a rollout counts as consumed
-- by the first train step whose data was ready (start + train_wait_s) at or after its group's last rollout
-- ended: a group-based trainer takes a group once all of it is back, and waits until its batch is complete.
-- The policy version a step starts from is its produced policy_version - 1, else its train_step.
CREATE OR REPLACE MACRO _rollout_steps_src(run) AS TABLE
WITH per_step AS (  -- a rollout's samples at each step that recorded one (one, but for compacted rollouts)
    SELECT
        rollout_id, train_step,
        min(sample_decision) AS decision,  -- a rollout's samples share its decision and staleness
        min(sample_staleness) AS sample_staleness,
        sum(sample_tokens) AS sample_tokens,
        max(mismatch_kl) AS mismatch_kl,
        max(logprob_diff_mean) AS logprob_diff_mean,
        max(logprob_diff_max) AS logprob_diff_max,
        max(importance_ratio_mean) AS importance_ratio_mean
    FROM samples
    WHERE run_id = run AND rollout_id IS NOT NULL
    GROUP BY rollout_id, train_step
),
recorded AS (
    SELECT
        rollout_id,
        min(train_step) AS step,
        arg_min(decision, train_step) AS decision,
        arg_min(sample_staleness, train_step) AS sample_staleness,
        arg_min(sample_tokens, train_step) AS sample_tokens,
        arg_min(mismatch_kl, train_step) AS mismatch_kl,
        arg_min(logprob_diff_mean, train_step) AS logprob_diff_mean,
        arg_min(logprob_diff_max, train_step) AS logprob_diff_max,
        arg_min(importance_ratio_mean, train_step) AS importance_ratio_mean
    FROM per_step
    GROUP BY rollout_id
),
train AS (
    SELECT train_step, coalesce(policy_version - 1, train_step) AS start_version, ready_ns
    FROM _steps(run)
),
launched AS (
    SELECT rollout_id, environment, task_id, group_id, policy_version, rollout_status, reward, end_ns
    FROM rollouts
    WHERE run_id = run
),
from_samples AS (
    SELECT
        l.* EXCLUDE (end_ns), s.step, s.decision, s.sample_tokens,
        coalesce(s.sample_staleness, t.start_version - l.policy_version) AS staleness,
        s.mismatch_kl, s.logprob_diff_mean, s.logprob_diff_max, s.importance_ratio_mean
    FROM launched AS l
    LEFT JOIN recorded AS s USING (rollout_id)
    LEFT JOIN train AS t ON t.train_step = s.step
    WHERE EXISTS (SELECT 1 FROM recorded)
),
group_ends AS (
    SELECT
        * EXCLUDE (end_ns),
        CASE WHEN group_id IS NULL THEN end_ns ELSE max(end_ns) OVER (PARTITION BY group_id) END AS group_end_ns
    FROM launched
    WHERE NOT EXISTS (SELECT 1 FROM recorded)
),
from_timing AS (
    SELECT
        g.* EXCLUDE (group_end_ns), t.train_step AS step, NULL::VARCHAR AS decision, NULL::BIGINT AS sample_tokens,
        t.start_version - g.policy_version AS staleness,
        NULL::DOUBLE AS mismatch_kl, NULL::DOUBLE AS logprob_diff_mean, NULL::DOUBLE AS logprob_diff_max,
        NULL::DOUBLE AS importance_ratio_mean
    FROM group_ends AS g
    ASOF LEFT JOIN train AS t ON g.group_end_ns <= t.ready_ns
)
SELECT * FROM from_samples
UNION ALL
SELECT * FROM from_timing;
-- The public name; a reader points it at the store's derived table (queries/tables.py).
CREATE OR REPLACE MACRO rollout_steps(run) AS TABLE SELECT * FROM _rollout_steps_src(run);
