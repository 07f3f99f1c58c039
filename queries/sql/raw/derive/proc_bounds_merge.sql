-- The previous bounds merged with the scoped rows' (_proc_bounds_of, process_bounds.sql): min, max and bool_or
-- merge exactly, since rows are only ever added or derived again from the same spans. Returned for the manifest.
CREATE OR REPLACE TABLE _proc_bounds AS
SELECT instance_id, min(lo) AS lo, max(hi) AS hi, max(devices) AS devices, bool_or(has_turns) AS has_turns
FROM (SELECT * FROM _proc_bounds UNION ALL BY NAME SELECT * FROM _proc_bounds_of)
GROUP BY instance_id;
SELECT * FROM _proc_bounds ORDER BY instance_id;
