-- Advisor lever "scoring" (docs/advisor.md): judge timeouts and verifier errors fixed, the scoring rate s → 1.
-- Every completed member of a group then has a reward, and a group with more scored members more often has
-- rewards that vary: with n(m) the nonzero-signal rate of a group of m scored members in its environment,
-- fitted to the run (a beta-binomial, macros/10_advice.sql),
--   usable_after = Σ_groups completed_g · n(completed_g) × f,  f the freshness rate
-- A timed-out judge call held its judge for its whole timeout; fixed, it takes as long as a judge call that
-- returned:  Δwork_judge = failed_judges × (mean seconds of a judge call that returned) − Σ seconds of the
-- failed ones. The trainer's work grows with the samples (macros/10_advice.sql).
-- Does not apply when every completed rollout was scored.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
after AS (
    SELECT
        sum(g.completed * _advice_signal(g.completed, g.fit_a, g.fit_b)) * any_value(b.freshness_rate)
            AS usable_after
    FROM _advice_fitted_groups($run_id, $step_lo, $step_hi) AS g, b
),
judging AS (  -- judge calls on completed rollouts, whether their scoring failed for the judge (_judge_sums)
    SELECT
        coalesce(sum(calls) FILTER (judge_failed), 0)::BIGINT AS failed_judges,
        coalesce(sum(judge_ns) FILTER (judge_failed), 0) / 1e9 AS failed_judge_s,
        coalesce(sum(calls) FILTER (NOT judge_failed), 0)::BIGINT AS ok_judges,
        sum(judge_ns) FILTER (NOT judge_failed) / 1e9 AS ok_judge_s
    FROM _judge_sums($run_id)
    WHERE step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
est AS (
    SELECT
        (b.completed - b.scored)::BIGINT AS unscored,  -- a scored rollout always completed (rollout_stages)
        j.failed_judges,
        j.failed_judge_s / nullif(j.failed_judges, 0) AS failed_judge_mean_s,
        j.ok_judge_s / nullif(j.ok_judges, 0) AS ok_judge_mean_s,
        b.scoring_rate < 1 AS applies,
        CASE WHEN b.scoring_rate IS NULL THEN 'no completed rollout consumed by a train step yet'
             WHEN b.scoring_rate >= 1 THEN 'every completed rollout was scored' END AS why_not,
        'scoring_rate' AS metric,
        b.scoring_rate AS before,
        1.0 AS after,
        (SELECT usable_after FROM after) AS usable_after,
        0.0 AS d_rollout_s,
        coalesce(j.failed_judges * j.ok_judge_s / nullif(j.ok_judges, 0) - j.failed_judge_s, 0) AS d_judge_s,
        0.0 AS d_teacher_s
    FROM b, judging AS j
)
SELECT 'scoring' AS lever, e.*,
    _advice_change(CASE WHEN e.applies THEN e.usable_after END, 0.0, e.d_judge_s, 0.0) AS _change
FROM est AS e
