-- The advisor's common ground (docs/advisor.md). Every lever is costed in usable rollouts per device-second:
--   U = usable / D,  D = Σ over terms (rollout, train, judge, teacher) of device-seconds (compute_terms.sql)
-- over the rollouts consumed by train steps step_lo..step_hi (NULL: every consumed rollout). A lever changes
-- usable (usable_after) and the work-seconds of some terms (Δwork: the summed span seconds of the term's
-- requests, _step_sums); each term's device-seconds move with its work at the run's measured utilization
-- u = device-seconds / work-seconds:
--   D_after = D + Σ u_term · Δwork_term,  gain = (usable_after / D_after) / (usable / D) − 1.
-- The trainer's work follows the samples it trains on: Δwork_train = slope · Δusable · tokens per usable, the
-- slope a least-squares fit of each train step's compute seconds on its train tokens.
-- Everything is read from per-step derived tables: _funnel_sums, _compute_busy, _step_sums, train_steps and the
-- advisor's own (macros/09_learning.sql), so the advisor costs the same whatever the run's length.

-- _advice_base(run, step_lo, step_hi): one row of the measured figures every lever starts from.
CREATE OR REPLACE MACRO _advice_base(run, step_lo, step_hi) AS TABLE
WITH stages AS (
    SELECT
        coalesce(sum(rollouts), 0)::BIGINT AS dispatched,
        coalesce(sum(rollouts) FILTER (completed), 0)::BIGINT AS completed,
        coalesce(sum(rollouts) FILTER (scored), 0)::BIGINT AS scored,
        coalesce(sum(rollouts) FILTER (nonzero_signal), 0)::BIGINT AS nonzero_signal,
        coalesce(sum(rollouts) FILTER (usable), 0)::BIGINT AS usable
    FROM _funnel_sums(run)
    WHERE step IS NOT NULL AND (step_lo IS NULL OR step >= step_lo) AND (step_hi IS NULL OR step <= step_hi)
),
busy AS (
    SELECT term, sum(busy_ns * coalesce(devices, 0)) / 1e9 AS device_s
    FROM _compute_busy(run)
    WHERE all_environments AND term IN ('rollout', 'train', 'judge', 'teacher')
      AND CASE
          WHEN step_lo IS NULL AND step_hi IS NULL THEN NOT by_step
          ELSE by_step AND step >= coalesce(step_lo, step) AND step <= coalesce(step_hi, step)
      END
    GROUP BY term
),
work AS (
    SELECT term, sum(span_ns) / 1e9 AS work_s
    FROM _step_sums(run)
    WHERE (step_lo IS NULL OR step >= step_lo) AND (step_hi IS NULL OR step <= step_hi)
    GROUP BY term
),
terms AS (
    SELECT
        sum(coalesce(b.device_s, 0)) AS device_seconds,
        sum(b.device_s) FILTER (t.term = 'rollout') AS rollout_device_s,
        sum(b.device_s) FILTER (t.term = 'train') AS train_device_s,
        sum(b.device_s) FILTER (t.term = 'judge') AS judge_device_s,
        sum(b.device_s) FILTER (t.term = 'teacher') AS teacher_device_s,
        sum(w.work_s) FILTER (t.term = 'rollout') AS rollout_work_s,
        sum(w.work_s) FILTER (t.term = 'train') AS train_work_s,
        sum(w.work_s) FILTER (t.term = 'judge') AS judge_work_s,
        sum(w.work_s) FILTER (t.term = 'teacher') AS teacher_work_s
    FROM (VALUES ('rollout'), ('train'), ('judge'), ('teacher')) AS t(term)
    LEFT JOIN busy AS b USING (term)
    LEFT JOIN work AS w USING (term)
),
train AS (
    SELECT
        regr_slope(compute_s, train_tokens) AS train_s_per_token,
        sum(train_tokens) AS train_tokens
    FROM (
        SELECT (end_ns - start_ns) / 1e9 - coalesce(train_wait_s, 0) AS compute_s, train_tokens
        FROM train_steps
        WHERE run_id = run AND train_step IS NOT NULL
          AND (step_lo IS NULL OR train_step >= step_lo) AND (step_hi IS NULL OR train_step <= step_hi)
    )
)
SELECT
    s.*,
    s.completed / nullif(s.dispatched, 0) AS completion_rate,
    s.scored / nullif(s.completed, 0) AS scoring_rate,
    s.nonzero_signal / nullif(s.scored, 0) AS nonzero_signal_rate,
    s.usable / nullif(s.nonzero_signal, 0) AS freshness_rate,
    coalesce(x.device_seconds, 0) AS device_seconds,
    s.usable / nullif(x.device_seconds, 0) AS usable_per_device_s,
    coalesce(x.rollout_device_s, 0) AS rollout_device_s,
    coalesce(x.train_device_s, 0) AS train_device_s,
    coalesce(x.judge_device_s, 0) AS judge_device_s,
    coalesce(x.teacher_device_s, 0) AS teacher_device_s,
    coalesce(x.rollout_work_s, 0) AS rollout_work_s,
    coalesce(x.train_work_s, 0) AS train_work_s,
    coalesce(x.judge_work_s, 0) AS judge_work_s,
    coalesce(x.teacher_work_s, 0) AS teacher_work_s,
    t.train_tokens / nullif(s.usable, 0) AS tokens_per_usable,
    greatest(coalesce(t.train_s_per_token, 0), 0) AS train_s_per_token
FROM stages AS s, terms AS x, train AS t;

-- _advice_trained_change(usable_after, d_rollout_s, d_judge_s, d_teacher_s, d_train_tokens): what a lever changes,
-- the column `_change` of its row: the usable rollouts it would give (NULL where it does not apply), the
-- work-seconds it adds (+) or saves (−) per term, and the tokens the trainer trains on besides those that follow
-- usable (compaction's repeated ones). advice_gains.sql costs every lever's change at once.
CREATE OR REPLACE MACRO _advice_trained_change(usable_after, d_rollout_s, d_judge_s, d_teacher_s, d_train_tokens) AS {
    'usable_after': usable_after::DOUBLE,
    'd_rollout_s': d_rollout_s::DOUBLE,
    'd_judge_s': d_judge_s::DOUBLE,
    'd_teacher_s': d_teacher_s::DOUBLE,
    'd_train_tokens': d_train_tokens::DOUBLE
};
-- _advice_change(usable_after, d_rollout_s, d_judge_s, d_teacher_s): the same for a lever whose training follows
-- usable alone.
CREATE OR REPLACE MACRO _advice_change(usable_after, d_rollout_s, d_judge_s, d_teacher_s) AS
    _advice_trained_change(usable_after, d_rollout_s, d_judge_s, d_teacher_s, 0);

-- _advice_groups(run, step_lo, step_hi): per group of consumed rollouts, its environment and task, its
-- dispatched, completed and scored members, those with a reward, the scored ones that succeeded (reward ≥ 0.5,
-- rewards in [0, 1]), the nonzero-signal ones and its scored members' lowest and highest reward: the per-step
-- group rows kept ahead (_advice_group_sums, macros/09_learning.sql) summed over the steps read.
CREATE OR REPLACE MACRO _advice_groups(run, step_lo, step_hi) AS TABLE
SELECT
    group_id,
    any_value(environment) AS environment,
    any_value(task) AS task,
    sum(dispatched)::BIGINT AS dispatched,
    sum(completed)::BIGINT AS completed,
    sum(scored)::BIGINT AS scored,
    sum(rewarded)::BIGINT AS rewarded,
    sum(successes)::BIGINT AS successes,
    sum(signal)::BIGINT AS signal,
    min(reward_lo) AS reward_lo,
    max(reward_hi) AS reward_hi
FROM _advice_group_sums(run)
WHERE step IS NOT NULL AND (step_lo IS NULL OR step >= step_lo) AND (step_hi IS NULL OR step <= step_hi)
GROUP BY group_id;
-- _advice_fitted_groups(run, step_lo, step_hi): the groups of _advice_groups, each with its environment's fitted
-- fit_a and fit_b (groups of an environment without a fit, where no group has two scored attempts, left out).
-- A group's rewards vary unless all its m scored attempts succeed or all fail. With a task's success
-- probability p ~ Beta(a, b) over an environment's tasks (a beta-binomial, fitted by moments to the groups'
-- successes: mean μ = Σk / Σm, intra-group correlation ρ = (Σ(k − mμ)² − μ(1 − μ)Σm) / (μ(1 − μ)Σm(m − 1)),
-- a + b = 1/ρ − 1), the nonzero-signal rate of a group of m scored attempts is n(m) = 1 − E[p^m] − E[(1 − p)^m]
-- (_advice_signal). More scored attempts per group mean more groups with signal: the scoring and
-- infrastructure levers read it. The groups are summed once and read twice (fit, then each group), not
-- summed again for the fit: the sum per group is most of those levers' time. Only the counts those levers
-- read are kept (each group's task, rewards and signal, which a materialized CTE would compute too, are not).
CREATE OR REPLACE MACRO _advice_fitted_groups(run, step_lo, step_hi) AS TABLE
WITH groups AS MATERIALIZED (
    SELECT group_id, environment, dispatched, completed, scored, successes FROM _advice_groups(run, step_lo, step_hi)
),
g AS (
    SELECT environment, scored AS m, successes AS k
    FROM groups
    WHERE scored >= 2
),
mu AS (
    SELECT environment, least(greatest(sum(k) / sum(m), 1e-3), 1 - 1e-3) AS mu FROM g GROUP BY environment
),
rho AS (
    SELECT
        environment, any_value(mu) AS mu,
        least(greatest(
            (sum((k - m * mu) * (k - m * mu)) - any_value(mu * (1 - mu)) * sum(m))
                / nullif(any_value(mu * (1 - mu)) * sum(m * (m - 1)), 0),
            1e-3), 0.999) AS rho
    FROM g JOIN mu USING (environment)
    GROUP BY environment
),
fit AS (
    SELECT environment, mu * (1 / rho - 1) AS fit_a, (1 - mu) * (1 / rho - 1) AS fit_b FROM rho
)
SELECT groups.*, fit.fit_a, fit.fit_b FROM groups JOIN fit USING (environment);
CREATE OR REPLACE MACRO _advice_signal(m, a, b) AS
    CASE
        WHEN m < 2 THEN 0.0
        ELSE 1 - exp(lgamma(a + m) - lgamma(a) + lgamma(a + b) - lgamma(a + b + m))
               - exp(lgamma(b + m) - lgamma(b) + lgamma(a + b) - lgamma(a + b + m))
    END;
