-- Length explosion against the limit (docs/metrics.md, "Detectors" and "Truncation"): per environment, the share
-- of the rollouts its latest $window consuming train steps trained on that a token limit cut off (value: the
-- response limit or the context length, whichever applied; part names the one that cut off more); fired when it is
-- at least $threshold: generations are running into their limit, and the cut-off samples (scored as they stand)
-- teach the policy about the limit, not the task. level: the cut-off rollouts; reference: the window's rollouts.
-- From the consumed rollouts per step and environment kept ahead (_generation_sums, macros/07).
WITH series AS (
    SELECT step, environment, sum(rollouts) AS rollouts, sum(cut_response) AS response, sum(cut_context) AS context
    FROM _generation_sums($run_id)
    WHERE step IS NOT NULL
    GROUP BY ALL
),
windows AS (
    SELECT
        step, environment,
        sum(rollouts) OVER w AS rollouts,
        sum(response) OVER w AS response,
        sum(context) OVER w AS context,
        row_number() OVER (PARTITION BY environment ORDER BY step) AS i
    FROM series
    WINDOW w AS (PARTITION BY environment ORDER BY step ROWS BETWEEN $window - 1 PRECEDING AND CURRENT ROW)
)
SELECT
    step, environment,
    CASE WHEN context > response THEN 'context' ELSE 'response' END AS part,
    (response + context) / rollouts AS value,
    response + context AS level,
    rollouts AS reference,
    (response + context) / rollouts >= $threshold AS fired,
    (response + context) / rollouts AS severity
FROM windows
WHERE i >= $window
ORDER BY step, environment
