-- Speculative decoding (docs/metrics.md): acceptance rate α = accepted / drafted, mean accepted length per
-- verify step, and Leviathan et al.'s expected tokens per verify step (1 - α^(k+1)) / (1 - α), for the run or
-- per policy version, drafter version, versions since the drafter's refresh, environment, rollout-length
-- bucket (the rollout's decoded tokens, rounded down to a power of two) or consuming step ($by), over the
-- turns that drafted. Summed from the turn sums (macros/06); k is the budget most of those turns used (the larger on a tie).
-- effective_speedup = (accepted + verify steps) / verify steps: the tokens each target-model verify step
-- yields (its accepted draft tokens and the one it decodes itself) against one token per step without a
-- drafter; the drafter's own cost is not counted. The turns that drafted are read summed per step,
-- environment, k and the grouping key ahead of time (_spec_sums, macros/07).
WITH kept AS (
    SELECT
        CASE WHEN $by = 'policy_version' THEN policy_version END AS policy_version,
        CASE WHEN $by = 'drafter_version' THEN drafter_version END AS drafter_version,
        CASE WHEN $by = 'versions_since_refresh' THEN versions_since_refresh END AS versions_since_refresh,
        CASE WHEN $by = 'environment' THEN environment END AS environment,
        CASE WHEN $by = 'length_bucket' THEN length_bucket END AS length_bucket,
        CASE WHEN $by = 'step' THEN step END AS step,
        spec_k, spec_turns, drafted, accepted, verify_steps
    FROM _spec_sums($run_id)
    WHERE grouped_by = CASE WHEN $by IN ('policy_version', 'drafter_version', 'versions_since_refresh',
                                       'length_bucket') THEN $by ELSE 'none' END
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
per_k AS (
    SELECT
        * EXCLUDE (spec_turns, drafted, accepted, verify_steps),
        sum(spec_turns) AS turns,
        sum(drafted) AS drafted,
        sum(accepted) AS accepted,
        sum(verify_steps) AS verify_steps
    FROM kept
    GROUP BY ALL
),
grouped AS (
    SELECT
        * EXCLUDE (spec_k, turns, drafted, accepted, verify_steps),
        sum(turns)::BIGINT AS turns,
        sum(drafted)::BIGINT AS drafted,
        sum(accepted)::BIGINT AS accepted,
        sum(verify_steps)::BIGINT AS verify_steps,
        arg_max(spec_k, [turns, spec_k]) FILTER (spec_k IS NOT NULL) AS k  -- on a tie, the larger k: order-free
    FROM per_k
    GROUP BY ALL
),
rated AS (
    SELECT *, accepted / nullif(drafted, 0) AS acceptance_rate FROM grouped
)
SELECT
    * EXCLUDE (k),
    accepted / nullif(verify_steps, 0) AS mean_accepted_length,
    (accepted + verify_steps) / nullif(verify_steps, 0) AS effective_speedup,
    CASE
        WHEN acceptance_rate >= 1 THEN k + 1
        ELSE (1 - pow(acceptance_rate, k + 1)) / (1 - acceptance_rate)
    END AS expected_tokens_per_step,
    k
FROM rated
ORDER BY ALL NULLS LAST
