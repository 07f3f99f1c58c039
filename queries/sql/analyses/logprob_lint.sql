-- Log-prob lint: turns whose recorded log-probabilities come from the drafter (logprobs_source = 'drafter'),
-- which silently trains on the drafter's distribution. Grouped by consuming step, policy version and
-- environment; no rows when the run is clean.
WITH consumed AS (
    SELECT rollout_id, step FROM rollout_steps($run_id)
)
SELECT
    c.step,
    t.policy_version,
    t.environment,
    count(*) AS turns,
    count(DISTINCT t.rollout_id) AS rollouts,
    min(t.start_time) AS first_seen,
    max(t.end_time) AS last_seen
FROM turns AS t
LEFT JOIN consumed AS c USING (rollout_id)
WHERE t.run_id = $run_id
  AND t.logprobs_source = 'drafter'
  AND ($step_lo IS NULL OR c.step >= $step_lo)
  AND ($step_hi IS NULL OR c.step <= $step_hi)
  AND ($environment IS NULL OR t.environment = $environment)
GROUP BY ALL
ORDER BY ALL NULLS LAST
