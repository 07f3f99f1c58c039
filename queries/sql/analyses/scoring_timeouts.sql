-- Scoring timeouts of the selection (docs/metrics.md, "Health"): the verifier and judge calls that timed out,
-- summed over scoring_latency.sql's consuming steps (read as `analysis`, in the same statement); calls of
-- rollouts no step has consumed yet are not counted.
SELECT coalesce(sum(timeouts), 0)::BIGINT AS timeouts
FROM analysis
WHERE step IS NOT NULL
