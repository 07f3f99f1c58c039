-- Staleness over time for the whole selection (docs/report.md, "staleness_timing"): over the consumed samples
-- of staleness_timing.sql's steps (read as `analysis`, in the same statement), their number and the means of
-- its four split figures (seconds in flight and queued, policy versions in flight and queued), each step's mean
-- weighted by its samples: the mean over every sample. NULL means when no sample was consumed.
SELECT
    coalesce(sum(samples), 0)::BIGINT AS samples,
    sum(in_flight_s_mean * samples) / nullif(sum(samples), 0) AS in_flight_s_mean,
    sum(queued_s_mean * samples) / nullif(sum(samples), 0) AS queued_s_mean,
    sum(in_flight_versions_mean * samples) / nullif(sum(samples), 0) AS in_flight_versions_mean,
    sum(queued_versions_mean * samples) / nullif(sum(samples), 0) AS queued_versions_mean
FROM analysis
