-- consumed_samples(run, step_lo, step_hi, env): the consumed samples the staleness analyses read,
-- each with its step, staleness, decision, environment and the run's rl.staleness.bound (as `bound`).
CREATE OR REPLACE MACRO consumed_samples(run, step_lo, step_hi, env) AS TABLE
SELECT s.step, s.staleness, s.decision, s.environment, b.bound
FROM rollout_steps(run) AS s,
    (SELECT max(staleness_bound) AS bound FROM spans WHERE run_id = run) AS b
WHERE s.step IS NOT NULL AND s.staleness IS NOT NULL
  AND (step_lo IS NULL OR s.step >= step_lo)
  AND (step_hi IS NULL OR s.step <= step_hi)
  AND (env IS NULL OR s.environment = env);
