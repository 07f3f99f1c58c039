-- Device-seconds on rollouts never used, over the selection (docs/metrics.md, "Goodput"): each of
-- wasted_devices.sql's columns (read as `analysis`, in the same statement) summed over its steps, named
-- wasted_<column>; NULL where no step recorded one.
SELECT sum(COLUMNS(* EXCLUDE (step))) AS 'wasted_\0'
FROM analysis
