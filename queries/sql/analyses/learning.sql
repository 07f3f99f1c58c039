-- Is it learning (docs/metrics.md, "Learning"): over the scored rollouts (a reward recorded), their count, the
-- mean reward and its 10th / 50th / 90th percentiles (linear interpolation, numpy's default), and the success
-- rate: the share whose reward is at least $success_threshold (docs/semconv.md, "Success"). For the run, or
-- per consuming step, environment or both ($by: step | environment | step_environment); the other key stays NULL.
-- Counted from the scored rollouts per step, environment, task and reward value kept ahead (_reward_counts,
-- macros/09_learning.sql). A step's percentiles are kept whole per step (_reward_steps, the same macros): per
-- step, they are read. Over several steps (the run, an environment) they are taken from the counts, exactly: with
-- n values in order, q's is the value at position h = (n − 1)·q (from 0), interpolated between the values at
-- floor(h) and ceil(h), as quantile_cont takes it; the value at position i is the lowest whose running count
-- passes i. $percentiles = false leaves them NULL and reads neither (a chart of the success rate needs none).
WITH kept AS (
    SELECT
        CASE WHEN $by IN ('step', 'step_environment') THEN step END AS step,
        CASE WHEN $by IN ('environment', 'step_environment') THEN environment END AS environment,
        reward,
        scored
    FROM _reward_counts($run_id)
    WHERE ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
      AND ($by NOT IN ('step', 'step_environment') OR step IS NOT NULL)
),
figures AS (
    SELECT
        step, environment,
        sum(scored)::BIGINT AS scored,
        sum(reward * scored) / sum(scored) AS reward_mean,
        coalesce(sum(scored) FILTER (reward >= $success_threshold), 0) / sum(scored) AS success_rate
    FROM kept
    GROUP BY step, environment
),
stepped AS (  -- per step: the step's own, over every environment or over the one chosen
    SELECT
        step,
        CASE WHEN $by = 'step_environment' THEN environment END AS environment,
        reward_p10, reward_p50, reward_p90
    FROM _reward_steps($run_id)
    WHERE $by IN ('step', 'step_environment')
      AND $percentiles IS DISTINCT FROM false
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND CASE
          WHEN $by = 'step' AND $environment IS NULL THEN all_environments
          ELSE NOT all_environments AND ($environment IS NULL OR environment = $environment)
      END
),
counted AS (  -- over several steps: the counts per value, for the running counts the percentiles read
    SELECT step, environment, reward, sum(scored) AS n
    FROM kept
    WHERE ($by IS NULL OR $by = 'environment') AND $percentiles IS DISTINCT FROM false
    GROUP BY step, environment, reward
),
running AS (
    SELECT
        step, environment, reward,
        sum(n) OVER (PARTITION BY step, environment ORDER BY reward ROWS UNBOUNDED PRECEDING) AS upto,
        sum(n) OVER (PARTITION BY step, environment) AS total
    FROM counted
),
picked AS (
    SELECT
        step, environment, q,
        (any_value(total) - 1) * q AS h,
        min(reward) FILTER (upto > floor((total - 1) * q)) AS below,
        min(reward) FILTER (upto > ceil((total - 1) * q)) AS above
    FROM running, (VALUES (0.1), (0.5), (0.9)) AS p(q)
    GROUP BY step, environment, q
),
percentiles AS (
    SELECT
        step, environment,
        any_value(below + (above - below) * (h - floor(h))) FILTER (q = 0.1) AS reward_p10,
        any_value(below + (above - below) * (h - floor(h))) FILTER (q = 0.5) AS reward_p50,
        any_value(below + (above - below) * (h - floor(h))) FILTER (q = 0.9) AS reward_p90
    FROM picked
    GROUP BY step, environment
    UNION ALL
    SELECT * FROM stepped
)
SELECT
    f.step, f.environment, f.scored, f.reward_mean, p.reward_p10, p.reward_p50, p.reward_p90, f.success_rate
FROM figures AS f
LEFT JOIN percentiles AS p ON p.step IS NOT DISTINCT FROM f.step AND p.environment IS NOT DISTINCT FROM f.environment
ORDER BY ALL NULLS LAST
