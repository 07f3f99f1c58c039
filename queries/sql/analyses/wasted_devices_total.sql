-- Device-seconds on rollouts never used, over the selection (docs/metrics.md, "Goodput"): each of
-- wasted_devices.sql's columns (read as `analysis`, in the same statement) summed over its steps, named
-- wasted_<column>, NULL where no step recorded one; and wasted_device_s, the three kinds of waste together
-- (infra_error + aborted + unused; 0 where none), the figure the report and the Health page headline.
SELECT
    sum(COLUMNS(* EXCLUDE (step))) AS 'wasted_\0',
    coalesce(sum(infra_error_device_s), 0) + coalesce(sum(aborted_device_s), 0)
        + coalesce(sum(unused_device_s), 0) AS wasted_device_s
FROM analysis
