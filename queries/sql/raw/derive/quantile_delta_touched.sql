-- One table's values a catch-up added (sign 1: its scoped rows of the scoped steps, @scoped) and removed (sign
-- -1: the rows of those steps in the parts it replaced, @files) as @alias, for refresh_quantiles.sql.
CREATE OR REPLACE TEMP VIEW @alias AS
SELECT 1 AS sign, * EXCLUDE (run_id) FROM @scoped
WHERE step IS NULL OR step IN (SELECT step FROM _scope_steps)
UNION ALL BY NAME
SELECT -1 AS sign, * EXCLUDE (run_id) FROM read_parquet(@files, hive_partitioning = false)
WHERE step IS NULL OR step IN (SELECT step FROM _scope_steps);
