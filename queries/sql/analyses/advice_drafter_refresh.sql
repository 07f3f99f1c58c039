-- Advisor lever "drafter refresh" (docs/advisor.md): the drafter refreshed often enough that acceptance stays
-- at its value just after the last refresh. By Leviathan et al. (2023) a verify step of k drafted tokens at
-- per-token acceptance α yields E = (1 − α^(k+1)) / (1 − α) tokens; decode time is verify steps × the time of
-- one, so at the fresh drafter's E0 a turn group decoding D tokens in T seconds at E = D / verify steps would
-- take T × E / E0:
--   Δwork_rollout = Σ over turns served later than $fresh_versions policy versions after their drafter was
--                   built of decode seconds × (E / E0 − 1)
-- E0 is measured (tokens per verify step) over the turns of the latest drafter's first $fresh_versions policy
-- versions, per environment, k and rollout-length bucket (else per environment and k). usable is unchanged.
-- Summed per turn group as Σ decode seconds × E / E0 − Σ decode seconds (weighted_s, macros/09_learning.sql).
-- Does not apply without speculative decoding, or when acceptance has not fallen since the last refresh.
WITH b AS (SELECT unnest($base)),  -- the measured starting point, advice_base.sql's row (_advice_base)
rows AS (  -- turn groups in which every turn drafted (_advice_spec_sums)
    SELECT
        environment, spec_k, length_bucket, drafter_version, drafter_policy_version, since,
        decode_tokens, verify_steps, decode_ns, drafted, accepted, weighted_s
    FROM _advice_spec_sums($run_id)
    WHERE drafter_policy_version IS NOT NULL AND step IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo) AND ($step_hi IS NULL OR step <= $step_hi)
),
latest AS (
    SELECT arg_max(drafter_version, drafter_policy_version) AS drafter_version FROM rows
),
fresh AS (
    SELECT * FROM rows WHERE since < $fresh_versions AND drafter_version = (SELECT drafter_version FROM latest)
),
e0_bucket AS (
    SELECT environment, spec_k, length_bucket, sum(decode_tokens) / sum(verify_steps) AS e0
    FROM fresh GROUP BY ALL
),
e0_env AS (
    SELECT environment, spec_k, sum(decode_tokens) / sum(verify_steps) AS e0,
           sum(accepted) / nullif(sum(drafted), 0) AS fresh_acceptance
    FROM fresh GROUP BY ALL
),
later_sums AS (  -- the later turn groups summed per environment, k and length bucket, the keys of E0
    SELECT
        environment, spec_k, length_bucket,
        sum(decode_tokens) AS decode_tokens, sum(verify_steps) AS verify_steps, sum(decode_ns) AS decode_ns,
        sum(drafted) AS drafted, sum(accepted) AS accepted, sum(weighted_s) AS weighted_s
    FROM rows
    WHERE since >= $fresh_versions
    GROUP BY ALL
),
later AS (
    SELECT l.*, l.weighted_s / coalesce(eb.e0, ee.e0) - l.decode_ns / 1e9 AS d_s
    FROM later_sums AS l
    JOIN e0_env AS ee USING (environment, spec_k)
    LEFT JOIN e0_bucket AS eb USING (environment, spec_k, length_bucket)
),
fresh_sums AS (
    SELECT
        sum(accepted) / nullif(sum(drafted), 0) AS acceptance,
        sum(decode_tokens) / nullif(sum(verify_steps), 0) AS tokens_per_step,
        count(*) AS groups
    FROM fresh
),
later_all AS (
    SELECT
        sum(accepted) / nullif(sum(drafted), 0) AS acceptance,
        sum(decode_tokens) / nullif(sum(verify_steps), 0) AS tokens_per_step,
        coalesce(sum(d_s), 0) AS d_rollout_s
    FROM later
),
rows_sums AS (SELECT max(since) AS max_versions_since_refresh, count(*) AS groups FROM rows),
est AS (  -- one row of one-row aggregates (as scalar subqueries they cost the optimizer more than the query)
    SELECT
        l.drafter_version,
        f.acceptance AS fresh_acceptance,
        a.acceptance AS later_acceptance,
        f.tokens_per_step AS fresh_tokens_per_step,
        a.tokens_per_step AS later_tokens_per_step,
        r.max_versions_since_refresh,
        a.d_rollout_s
    FROM latest AS l, fresh_sums AS f, later_all AS a, rows_sums AS r
),
judged AS (
    SELECT
        e.*,
        r.groups > 0 AND f.groups > 0 AND e.d_rollout_s < 0 AS applies,
        CASE
            WHEN r.groups = 0 THEN 'no speculative decoding recorded'
            WHEN f.groups = 0 THEN 'no turns just after a drafter refresh to compare with'
            WHEN e.d_rollout_s >= 0 THEN 'acceptance has not fallen since the drafter was refreshed'
        END AS why_not,
        'acceptance_rate' AS metric,
        e.later_acceptance AS before,
        e.fresh_acceptance AS after,
        b.usable::DOUBLE AS usable_after
    FROM est AS e, rows_sums AS r, fresh_sums AS f, b
)
SELECT 'drafter_refresh' AS lever, j.*,
    _advice_change(CASE WHEN j.applies THEN j.usable_after END, j.d_rollout_s, 0.0, 0.0) AS _change
FROM judged AS j
