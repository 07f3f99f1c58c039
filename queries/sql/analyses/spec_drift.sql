-- Drafter drift: per drafter version, acceptance over the first $baseline_versions policy versions it served
-- (its baseline) against the latest $baseline_versions, the drop in percentage points, and whether the drop
-- exceeds $drop_points; max_drop_points, on every row, is the largest drop of any drafter (the report's
-- spec_decode.max_drift_points); worst marks the drafter with that drop (the acceptance-drift check's subject) and
-- current the drafter serving the latest policy versions (the one a refresh would replace). Summed from the turns that drafted, per step, environment, drafter and policy version
-- (_spec_sums, macros/07).
WITH kept AS (
    SELECT drafter_version, policy_version, drafted, accepted
    FROM _spec_sums($run_id)
    WHERE grouped_by = 'drift' AND drafter_version IS NOT NULL AND policy_version IS NOT NULL
      AND ($step_lo IS NULL OR step >= $step_lo)
      AND ($step_hi IS NULL OR step <= $step_hi)
      AND ($environment IS NULL OR environment = $environment)
),
per_version AS (
    SELECT drafter_version, policy_version, sum(drafted) AS drafted, sum(accepted) AS accepted
    FROM kept
    GROUP BY ALL
),
bounds AS (  -- each drafter's last policy version of its first $baseline_versions, first of its latest
    SELECT
        drafter_version,
        list_max(min(policy_version, $baseline_versions)) AS baseline_to,
        list_min(max(policy_version, $baseline_versions)) AS latest_from
    FROM per_version
    GROUP BY drafter_version
),
compared AS (  -- (per_version holds each policy version of a drafter once: no ties at the bounds)
    SELECT
        drafter_version,
        min(policy_version) AS first_policy_version,
        max(policy_version) AS last_policy_version,
        count(*) AS policy_versions,
        sum(accepted) FILTER (policy_version <= baseline_to)
            / nullif(sum(drafted) FILTER (policy_version <= baseline_to), 0) AS baseline_acceptance,
        sum(accepted) FILTER (policy_version >= latest_from)
            / nullif(sum(drafted) FILTER (policy_version >= latest_from), 0) AS latest_acceptance
    FROM per_version
    JOIN bounds USING (drafter_version)
    GROUP BY drafter_version
)
SELECT
    *,
    100 * (baseline_acceptance - latest_acceptance) AS drop_points,
    coalesce(100 * (baseline_acceptance - latest_acceptance) > $drop_points, false) AS flagged,
    max(100 * (baseline_acceptance - latest_acceptance)) OVER () AS max_drop_points,
    coalesce(
        baseline_acceptance - latest_acceptance IS NOT NULL
        AND row_number() OVER (
            ORDER BY baseline_acceptance - latest_acceptance DESC NULLS LAST, drafter_version
        ) = 1,
        false
    ) AS worst,
    row_number() OVER (ORDER BY first_policy_version DESC, drafter_version DESC) = 1 AS current
FROM compared
ORDER BY first_policy_version, drafter_version
