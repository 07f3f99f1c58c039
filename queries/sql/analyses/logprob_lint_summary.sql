-- The log-prob lint in one row: how many turns of the selection recorded the drafter's log-probabilities, and
-- the consuming steps and policy versions they span (NULL when none did, or for turns not consumed yet).
SELECT
    count(*) AS turns,
    min(t.step) AS first_step,
    max(t.step) AS last_step,
    min(t.policy_version) AS first_policy_version,
    max(t.policy_version) AS last_policy_version
FROM _turns_stepped($run_id) AS t
WHERE t.logprobs_source = 'drafter'
  AND ($step_lo IS NULL OR t.step >= $step_lo)
  AND ($step_hi IS NULL OR t.step <= $step_hi)
  AND ($environment IS NULL OR t.environment = $environment)
