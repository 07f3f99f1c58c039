-- Advisor lever "infrastructure" (docs/advisor.md): infra errors and aborts removed, the completion rate c → 1.
-- Every member of a group then completes and is scored at the scoring rate s; a group with more scored
-- members more often has rewards that vary: with n(m) the nonzero-signal rate of a group of m scored members
-- in its environment, fitted to the run (a beta-binomial, macros/10_advice.sql),
--   usable_after = Σ_groups m'_g · n(m'_g) × f,  m'_g = round(dispatched_g × s), f the freshness rate
-- Completed, each would do the work of a completed rollout of its environment instead of the part it did:
--   Δwork_rollout = Σ_env (s/token)_env × (failed_env × mean decoded tokens of a completed rollout − decoded
--                   tokens of the failed ones)
--   Δwork_judge / Δwork_teacher = Σ_env failed_env × mean judge / teacher seconds per completed rollout
-- with (s/token)_env the environment's generation seconds per decoded token (_step_sums / _funnel_sums).
-- Evidence: the device-seconds the failed rollouts burned. Does not apply when every rollout completed.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
per_env AS (  -- from the rollouts per step and funnel outcome, with their decoded tokens (_funnel_sums)
    SELECT
        environment,
        coalesce(sum(rollouts) FILTER (NOT completed), 0)::BIGINT AS failed,
        coalesce(sum(rollouts) FILTER (completed), 0)::BIGINT AS completed,
        sum(generated) AS generated,
        sum(generated) FILTER (NOT completed) AS failed_generated,
        sum(generated) FILTER (completed) / sum(rollouts) FILTER (completed) AS completed_mean_generated
    FROM _funnel_sums($run_id)
    WHERE step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
    GROUP BY environment
),
sums AS (
    SELECT environment, term, sum(span_ns) / 1e9 AS work_s
    FROM _step_sums($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
    GROUP BY ALL
),
after AS (
    SELECT
        sum(g.m_after * _advice_signal(g.m_after, g.fit_a, g.fit_b)) * any_value(b.freshness_rate) AS usable_after
    FROM (
        SELECT g.*, round(g.dispatched * b.scoring_rate) AS m_after
        FROM _advice_fitted_groups($run_id, $step_lo, $step_hi) AS g, b
    ) AS g, b
),
deltas AS (
    SELECT
        sum(p.failed)::BIGINT AS failed,
        sum(coalesce(r.work_s / nullif(p.generated, 0), 0)
            * (p.failed * coalesce(p.completed_mean_generated, 0) - coalesce(p.failed_generated, 0))) AS d_rollout_s,
        sum(coalesce(r.work_s / nullif(p.generated, 0), 0) * coalesce(p.failed_generated, 0)) AS burned_rollout_s,
        sum(p.failed * coalesce(j.work_s / nullif(p.completed, 0), 0)) AS d_judge_s,
        sum(p.failed * coalesce(t.work_s / nullif(p.completed, 0), 0)) AS d_teacher_s
    FROM per_env AS p
    LEFT JOIN sums AS r ON r.environment = p.environment AND r.term = 'rollout'
    LEFT JOIN sums AS j ON j.environment = p.environment AND j.term = 'judge'
    LEFT JOIN sums AS t ON t.environment = p.environment AND t.term = 'teacher'
),
est AS (
    SELECT
        d.failed,
        d.burned_rollout_s * b.rollout_device_s / nullif(b.rollout_work_s, 0) AS burned_device_s,
        b.completion_rate < 1 AS applies,
        CASE WHEN b.completion_rate IS NULL THEN 'no rollout consumed by a train step yet'
             WHEN b.completion_rate >= 1 THEN 'every rollout completed' END AS why_not,
        'completion_rate' AS metric,
        b.completion_rate AS before,
        1.0 AS after,
        (SELECT usable_after FROM after) AS usable_after,
        coalesce(d.d_rollout_s, 0) AS d_rollout_s,
        coalesce(d.d_judge_s, 0) AS d_judge_s,
        coalesce(d.d_teacher_s, 0) AS d_teacher_s
    FROM b, deltas AS d
)
SELECT 'infra' AS lever, e.*,
    _advice_change(CASE WHEN e.applies THEN e.usable_after END, e.d_rollout_s, e.d_judge_s, e.d_teacher_s) AS _change
FROM est AS e
