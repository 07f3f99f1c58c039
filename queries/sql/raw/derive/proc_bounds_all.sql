-- Each process's bounds computed from the final turns and rollouts (process_bounds.sql, once: a state without
-- them in its manifest), and returned for the manifest.
CREATE OR REPLACE TABLE _proc_bounds AS SELECT * FROM _proc_bounds_of;
SELECT * FROM _proc_bounds ORDER BY instance_id;
