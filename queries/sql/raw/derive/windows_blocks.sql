-- The windows before $from_ns are kept as they are (_kept_steps: their steps' rows, read by the fragment
-- rewrite_blocks keeps, as a table because views take no parameters); answers the steps whose blocks are
-- rewritten: those of the rows swept again (_merged) and of every window from $from_ns on.
CREATE OR REPLACE TEMP TABLE _kept_steps AS SELECT train_step FROM _old_step_starts WHERE start_ns < $from_ns;
SELECT step FROM _merged WHERE step IS NOT NULL
UNION
SELECT train_step FROM _old_step_starts WHERE start_ns >= $from_ns;
