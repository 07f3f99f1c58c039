-- The advisor's common ground (docs/advisor.md). Every lever is costed in usable rollouts per device-second:
--   U = usable / D,  D = Σ over terms (rollout, train, judge, teacher) of device-seconds (compute_terms.sql)
-- over the rollouts consumed by train steps step_lo..step_hi (NULL: every consumed rollout). A lever changes
-- usable (usable_after) and the work-seconds of some terms (Δwork: the summed span seconds of the term's
-- requests, _step_sums); each term's device-seconds move with its work at the run's measured utilization
-- u = device-seconds / work-seconds:
--   D_after = D + Σ u_term · Δwork_term,  gain = (usable_after / D_after) / (usable / D) − 1.
-- The trainer's work follows the samples it trains on: Δwork_train = slope · Δusable · tokens per usable, the
-- slope a least-squares fit of each train step's compute seconds on its train tokens.
-- Everything is read from per-rollout and per-step derived tables: rollout_stages, _compute_busy, _step_sums,
-- train_steps.

-- _advice_base(run, step_lo, step_hi): one row of the measured figures every lever starts from.
CREATE OR REPLACE MACRO _advice_base(run, step_lo, step_hi) AS TABLE
WITH stages AS (
    SELECT
        count(*) AS dispatched,
        count(*) FILTER (completed) AS completed,
        count(*) FILTER (scored) AS scored,
        count(*) FILTER (nonzero_signal) AS nonzero_signal,
        count(*) FILTER (usable) AS usable
    FROM rollout_stages(run)
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
    SELECT t.term, coalesce(b.device_s, 0) AS device_s, coalesce(w.work_s, 0) AS work_s
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
    (SELECT sum(device_s) FROM terms) AS device_seconds,
    (SELECT device_s FROM terms WHERE term = 'rollout') AS rollout_device_s,
    (SELECT device_s FROM terms WHERE term = 'train') AS train_device_s,
    (SELECT device_s FROM terms WHERE term = 'judge') AS judge_device_s,
    (SELECT device_s FROM terms WHERE term = 'teacher') AS teacher_device_s,
    (SELECT work_s FROM terms WHERE term = 'rollout') AS rollout_work_s,
    (SELECT work_s FROM terms WHERE term = 'train') AS train_work_s,
    (SELECT work_s FROM terms WHERE term = 'judge') AS judge_work_s,
    (SELECT work_s FROM terms WHERE term = 'teacher') AS teacher_work_s,
    t.train_tokens / nullif(s.usable, 0) AS tokens_per_usable,
    greatest(coalesce(t.train_s_per_token, 0), 0) AS train_s_per_token
FROM stages AS s, train AS t;

-- _advice_row(run, step_lo, step_hi, usable_after, d_rollout_s, d_judge_s, d_teacher_s): what a lever buys, from
-- the usable rollouts it would give and the work-seconds it adds (+) or saves (−) per term.
CREATE OR REPLACE MACRO _advice_row(run, step_lo, step_hi, usable_after, d_rollout_s, d_judge_s, d_teacher_s) AS TABLE
WITH b AS (SELECT * FROM _advice_base(run, step_lo, step_hi)),
d AS (
    SELECT
        b.*,
        b.train_s_per_token * (usable_after - b.usable) * coalesce(b.tokens_per_usable, 0) AS d_train_s,
        b.rollout_device_s / nullif(b.rollout_work_s, 0) AS u_rollout,
        b.train_device_s / nullif(b.train_work_s, 0) AS u_train,
        b.judge_device_s / nullif(b.judge_work_s, 0) AS u_judge,
        b.teacher_device_s / nullif(b.teacher_work_s, 0) AS u_teacher
    FROM b
),
a AS (
    SELECT
        d.*,
        d.device_seconds
            + coalesce(u_rollout * d_rollout_s, 0) + coalesce(u_train * d_train_s, 0)
            + coalesce(u_judge * d_judge_s, 0) + coalesce(u_teacher * d_teacher_s, 0) AS device_seconds_after
    FROM d
)
SELECT
    usable,
    usable_after,
    usable * tokens_per_usable AS usable_tokens,
    usable_after * tokens_per_usable AS usable_tokens_after,
    device_seconds,
    device_seconds_after,
    coalesce(u_rollout * d_rollout_s, 0) AS rollout_device_s_delta,
    coalesce(u_train * d_train_s, 0) AS train_device_s_delta,
    coalesce(u_judge * d_judge_s, 0) AS judge_device_s_delta,
    coalesce(u_teacher * d_teacher_s, 0) AS teacher_device_s_delta,
    usable / nullif(device_seconds, 0) AS usable_per_device_s,
    usable_after / nullif(device_seconds_after, 0) AS usable_per_device_s_after,
    (usable_after / nullif(device_seconds_after, 0)) / nullif(usable / nullif(device_seconds, 0), 0) - 1 AS gain
FROM a;

-- _advice_groups(run, step_lo, step_hi): per group of consumed rollouts, its dispatched, completed and scored
-- members and its nonzero-signal ones. A group with more scored members is more likely to have rewards that
-- vary, so the levers that add scored members read the nonzero-signal rate as a function of them:
CREATE OR REPLACE MACRO _advice_groups(run, step_lo, step_hi) AS TABLE
SELECT
    group_id,
    count(*) AS dispatched,
    count(*) FILTER (completed) AS completed,
    count(*) FILTER (scored) AS scored,
    count(*) FILTER (nonzero_signal) AS signal
FROM rollout_stages(run)
WHERE group_id IS NOT NULL AND step IS NOT NULL
  AND (step_lo IS NULL OR step >= step_lo) AND (step_hi IS NULL OR step <= step_hi)
GROUP BY group_id;
-- _advice_signal_fit(run, step_lo, step_hi): the share of all-equal groups falls about geometrically with their
-- scored members m (p^m + (1 − p)^m for one task), so n(m) = 1 − exp(a + b·m), a and b a least-squares fit of
-- ln(1 − n) on m over the groups of m ≥ 2 scored members (each m weighted by its groups); a lever reads only
-- its shape (a ratio), not its level.
CREATE OR REPLACE MACRO _advice_signal_fit(run, step_lo, step_hi) AS TABLE
WITH curve AS (
    SELECT scored AS m, count(*) AS w, ln(greatest(1 - sum(signal) / sum(scored), 1e-3)) AS y
    FROM _advice_groups(run, step_lo, step_hi)
    WHERE scored >= 2
    GROUP BY scored
),
means AS (SELECT sum(w * m) / sum(w) AS mx, sum(w * y) / sum(w) AS my FROM curve),
slope AS (
    SELECT coalesce(sum(w * (m - mx) * (y - my)) / nullif(sum(w * (m - mx) * (m - mx)), 0), 0) AS b
    FROM curve, means
)
SELECT my - b * mx AS a, b FROM means, slope;
CREATE OR REPLACE MACRO _advice_signal(m, a, b) AS CASE WHEN m >= 2 THEN 1 - exp(a + b * m) ELSE 0 END;
