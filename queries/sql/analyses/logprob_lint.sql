-- Log-prob lint: turns whose recorded log-probabilities come from the drafter (logprobs_source = 'drafter'),
-- which silently trains on the drafter's distribution. Grouped by consuming step, policy version and
-- environment; no rows when the run is clean. Read from those groups kept ahead (_lint_sums, macros/07): a filter
-- on step or environment keeps or drops whole groups.
SELECT t.step, t.policy_version, t.environment, t.turns, t.rollouts, t.first_seen, t.last_seen
FROM _lint_sums($run_id) AS t
WHERE ($step_lo IS NULL OR t.step >= $step_lo)
  AND ($step_hi IS NULL OR t.step <= $step_hi)
  AND ($environment IS NULL OR t.environment = $environment)
ORDER BY ALL NULLS LAST
