-- Rollouts in flight over every environment (docs/report.md, "health"; the stall check): the sum of
-- in_flight.sql's rows (read as `analysis`, in the same statement), and the oldest of them: its age in seconds,
-- id, environment and process. 0 and NULLs when none is in flight.
SELECT
    coalesce(sum(in_flight), 0)::BIGINT AS in_flight,
    max(oldest_age_s) AS oldest_age_s,
    arg_max(oldest_rollout_id, oldest_age_s) AS oldest_rollout_id,
    arg_max(environment, oldest_age_s) AS oldest_environment,
    arg_max(oldest_instance_id, oldest_age_s) AS oldest_instance_id
FROM analysis
