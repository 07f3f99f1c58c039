-- Reward rising while a second signal falls, the reward-hacking signature (docs/metrics.md, "Detectors"): per
-- environment, the mean reward of its scored rollouts (what the trainer optimises) against each second signal the
-- run records: the success rate (reward ≥ $success_threshold: solved, not merely scored) and each scoring
-- component's mean ('verifier:<name>', 'judge:<model>': a verifier's pass rate against the judge's score). Over
-- the latest $window consuming train steps against the $window before: level = how much the reward rose,
-- reference = how much the signal (part) fell, each on its own scale (divided by the largest mean magnitude it had
-- at any step, so a pass rate, a judge's 0–1 score and a 0–5 bonus compare alike), value = the smaller of the two;
-- fired when both moved by at least $threshold: the policy is getting better at the reward and worse at what it
-- stands for.
-- From the scored rollouts per reward value and the scores per component kept ahead (_reward_counts,
-- _reward_sums, macros/07 and 09).
WITH rewards AS (
    SELECT
        step, environment,
        sum(reward * scored) AS reward_sum,
        sum(scored) AS scored,
        sum(scored) FILTER (reward >= $success_threshold) AS successes
    FROM _reward_counts($run_id)
    WHERE step IS NOT NULL
    GROUP BY ALL
),
signals AS (  -- every second signal, per step and environment: its sum and count
    SELECT step, environment, 'success rate' AS part, coalesce(successes, 0) AS total, scored AS n FROM rewards
    UNION ALL
    SELECT step, environment, kind || ':' || coalesce(reward_name, kind), sum(reward_sum), sum(scored)
    FROM _reward_sums($run_id)
    WHERE step IS NOT NULL AND scored > 0
    GROUP BY ALL
),
paired AS (
    SELECT s.step, s.environment, s.part, s.total, s.n, r.reward_sum, r.scored
    FROM signals AS s
    JOIN rewards AS r ON r.step = s.step AND r.environment IS NOT DISTINCT FROM s.environment
),
scaled AS (  -- each series' scale: the largest mean magnitude it had at any step
    SELECT
        *,
        max(abs(reward_sum / scored)) OVER (PARTITION BY environment, part) AS reward_scale,
        max(abs(total / n)) OVER (PARTITION BY environment, part) AS signal_scale
    FROM paired
),
windows AS (
    SELECT
        step, environment, part,
        sum(reward_sum) OVER w / sum(scored) OVER w / nullif(reward_scale, 0) AS reward,
        sum(total) OVER w / sum(n) OVER w / nullif(signal_scale, 0) AS signal,
        row_number() OVER (PARTITION BY environment, part ORDER BY step) AS i
    FROM scaled
    WINDOW w AS (PARTITION BY environment, part ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
moved AS (
    SELECT
        step, environment, part, i,
        reward - lag(reward, $window) OVER p AS rise,
        lag(signal, $window) OVER p - signal AS fall
    FROM windows
    WINDOW p AS (PARTITION BY environment, part ORDER BY step)
)
SELECT
    step, environment, part, least(rise, fall) AS value, rise AS level, fall AS reference,
    least(rise, fall) >= $threshold AS fired,
    least(rise, fall) AS severity
FROM moved
WHERE i >= 2 * $window
ORDER BY step, environment, part
