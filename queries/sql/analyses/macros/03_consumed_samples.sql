-- consumed_samples(run, step_lo, step_hi, env): the consumed samples the staleness analyses read,
-- each with its step, staleness, decision, environment and the run's rl.staleness.bound (as `bound`), as
-- rollout_stages judged freshness against it.
CREATE OR REPLACE MACRO consumed_samples(run, step_lo, step_hi, env) AS TABLE
SELECT step, staleness, decision, environment, staleness_bound AS bound
FROM rollout_stages(run)
WHERE step IS NOT NULL AND staleness IS NOT NULL
  AND (step_lo IS NULL OR step >= step_lo)
  AND (step_hi IS NULL OR step <= step_hi)
  AND (env IS NULL OR environment = env);
