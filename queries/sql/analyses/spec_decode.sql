-- Speculative decoding (docs/metrics.md): acceptance rate α = accepted / drafted, mean accepted length per
-- verify step, and Leviathan et al.'s expected tokens per verify step (1 - α^(k+1)) / (1 - α), for the run or
-- per policy version, drafter version, versions since the drafter's refresh, environment, rollout-length
-- bucket (the rollout's decoded tokens, rounded down to a power of two) or consuming step ($by).
WITH consumed AS (
    SELECT rollout_id, step
    FROM rollout_steps($run_id)
    WHERE $by = 'step' OR $step_lo IS NOT NULL OR $step_hi IS NOT NULL
),
lengths AS (
    SELECT rollout_id, generated AS decoded FROM _rollout_work($run_id) WHERE $by = 'length_bucket'
),
kept AS (
    SELECT
        t.*, c.step,
        CAST(pow(2, floor(log2(greatest(l.decoded, 1)))) AS BIGINT) AS length_bucket
    FROM turns AS t
    LEFT JOIN consumed AS c USING (rollout_id)
    LEFT JOIN lengths AS l USING (rollout_id)
    WHERE t.run_id = $run_id
      AND t.spec_draft_tokens IS NOT NULL
      AND ($step_lo IS NULL OR c.step >= $step_lo)
      AND ($step_hi IS NULL OR c.step <= $step_hi)
      AND ($environment IS NULL OR t.environment = $environment)
),
grouped AS (
    SELECT
        CASE WHEN $by = 'policy_version' THEN policy_version END AS policy_version,
        CASE WHEN $by = 'drafter_version' THEN drafter_version END AS drafter_version,
        CASE WHEN $by = 'versions_since_refresh' THEN policy_version - drafter_policy_version END
            AS versions_since_refresh,
        CASE WHEN $by = 'environment' THEN environment END AS environment,
        CASE WHEN $by = 'length_bucket' THEN length_bucket END AS length_bucket,
        CASE WHEN $by = 'step' THEN step END AS step,
        count(*) AS turns,
        sum(spec_draft_tokens)::BIGINT AS drafted,
        sum(spec_accepted_tokens)::BIGINT AS accepted,
        sum(spec_verify_steps)::BIGINT AS verify_steps,
        mode(spec_k) AS k
    FROM kept
    GROUP BY ALL
),
rated AS (
    SELECT *, accepted / nullif(drafted, 0) AS acceptance_rate FROM grouped
)
SELECT
    * EXCLUDE (k),
    accepted / nullif(verify_steps, 0) AS mean_accepted_length,
    CASE
        WHEN acceptance_rate >= 1 THEN k + 1
        ELSE (1 - pow(acceptance_rate, k + 1)) / (1 - acceptance_rate)
    END AS expected_tokens_per_step,
    k
FROM rated
ORDER BY ALL NULLS LAST
