-- One table's values a catch-up added (sign 1: its scoped rows of the scoped steps, @scoped) as @alias, which
-- refresh_quantiles.sql reads to move the percentiles' windows.
CREATE OR REPLACE TEMP VIEW @alias AS
SELECT 1 AS sign, * EXCLUDE (run_id) FROM @scoped
WHERE step IS NULL OR step IN (SELECT step FROM _scope_steps);
