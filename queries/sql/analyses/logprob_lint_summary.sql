-- The log-prob lint in one row: how many turns of the selection recorded the drafter's log-probabilities, and
-- the consuming steps and policy versions they span (NULL when none did, or for turns not consumed yet).
-- Counted from the drafter-log-prob turns per step, policy version and environment kept ahead (_lint_sums,
-- macros/07).
SELECT
    coalesce(sum(l.turns), 0)::BIGINT AS turns,
    min(l.step) AS first_step,
    max(l.step) AS last_step,
    min(l.policy_version) AS first_policy_version,
    max(l.policy_version) AS last_policy_version
FROM _lint_sums($run_id) AS l
WHERE ($step_lo IS NULL OR l.step >= $step_lo)
  AND ($step_hi IS NULL OR l.step <= $step_hi)
  AND ($environment IS NULL OR l.environment = $environment)
