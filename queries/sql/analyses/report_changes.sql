-- How two runs' reports differ, figure by figure (the Compare page): for each numeric figure of the report
-- (dotted keys of `rollscope report --json`, e.g. funnel.usable), its value in the first run, in the second,
-- change = second − first, and relative_change = change / |first| (NULL where the first is 0 or either is
-- missing). A share's change is in the share's own unit (0.05 is 5 percentage points).
WITH figures AS (
    SELECT
        unnest($keys) AS key,
        unnest($first)::DOUBLE AS first,
        unnest($second)::DOUBLE AS second,
        generate_subscripts($keys, 1) AS position
)
SELECT
    key,
    first,
    second,
    second - first AS change,
    (second - first) / nullif(abs(first), 0) AS relative_change
FROM figures
ORDER BY position
