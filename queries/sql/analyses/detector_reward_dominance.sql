-- One reward component dominating the total (docs/metrics.md, "Detectors"): in an environment whose rollouts are
-- scored by two or more components (verifiers by reward_name, judges by model), each component's share of the
-- scores' total magnitude (Σ |score|) over the latest $window consuming train steps (value; level: its Σ |score|,
-- reference: every component's). Fired when one component's share is at least $threshold while over the
-- environment's first $window steps it was a minor part, at most 1 − $threshold: a small part of the reward (a
-- format or length bonus, a lenient judge) took over the total, and the policy now learns that part alone. The
-- main component's share growing as the policy learns it, or one that dominated from the start (the reward's
-- design), does not fire. part: 'verifier:<name>' or 'judge:<model>'.
-- From the scores per step, environment and component kept ahead (_reward_sums, macros/07).
WITH sums AS (
    SELECT step, environment, kind || ':' || coalesce(reward_name, kind) AS part, sum(reward_abs_sum) AS magnitude
    FROM _reward_sums($run_id)
    WHERE step IS NOT NULL AND scored > 0
    GROUP BY ALL
),
multi AS (  -- environments scored by two components or more
    SELECT environment FROM sums GROUP BY environment HAVING count(DISTINCT part) >= 2
),
grid AS (  -- every component at every step its environment was scored (0 where it scored nothing)
    SELECT s.step, s.environment, p.part, coalesce(m.magnitude, 0) AS magnitude
    FROM (SELECT DISTINCT step, environment FROM sums) AS s
    JOIN (SELECT DISTINCT environment, part FROM sums) AS p ON p.environment IS NOT DISTINCT FROM s.environment
    LEFT JOIN sums AS m ON m.step = s.step AND m.environment IS NOT DISTINCT FROM s.environment AND m.part = p.part
    WHERE EXISTS (SELECT 1 FROM multi WHERE multi.environment IS NOT DISTINCT FROM s.environment)
),
windows AS (
    SELECT
        step, environment, part,
        sum(magnitude) OVER w AS level,
        row_number() OVER (PARTITION BY environment, part ORDER BY step) AS i
    FROM grid
    WINDOW w AS (PARTITION BY environment, part ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
),
shares AS (
    SELECT *, sum(level) OVER (PARTITION BY environment, step) AS reference FROM windows WHERE i >= $window
),
judged AS (
    SELECT
        *, level / nullif(reference, 0) AS share,
        first_value(level / nullif(reference, 0)) OVER (PARTITION BY environment, part ORDER BY step) AS first_share
    FROM shares
)
SELECT
    step, environment, part, share AS value, level, reference,
    share >= $threshold AND first_share <= 1 - $threshold AS fired,
    share AS severity
FROM judged
ORDER BY step, environment, part
