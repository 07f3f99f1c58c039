-- Log-prob lint: turns whose recorded log-probabilities come from the drafter (logprobs_source = 'drafter'),
-- which silently trains on the drafter's distribution. Grouped by consuming step, policy version and
-- environment; no rows when the run is clean.
SELECT
    t.step,
    t.policy_version,
    t.environment,
    count(*) AS turns,
    count(DISTINCT t.rollout_id) AS rollouts,
    min(t.start_time) AS first_seen,
    max(t.end_time) AS last_seen
FROM _turns_stepped($run_id) AS t
WHERE t.logprobs_source = 'drafter'
  AND ($step_lo IS NULL OR t.step >= $step_lo)
  AND ($step_hi IS NULL OR t.step <= $step_hi)
  AND ($environment IS NULL OR t.environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
