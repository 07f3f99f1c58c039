-- Staleness over time (docs/metrics.md, "Staleness and throughput"): per consuming step, over its consumed
-- samples, where their staleness comes from. In flight: from the rollout's dispatch (its span's start) to its
-- end, in seconds, and in policy versions produced meanwhile (the newest version a finished train step had
-- produced by the rollout's end, less the rollout's policy_version). Queued: from its end to its consuming
-- step's data being ready (start + train_wait_s), in seconds, and the rest of its staleness in versions
-- (staleness − in flight). prime-rl logs the same split as off_policy/in_flight and off_policy/in_queue.
-- Each step's figures are kept ahead, over every environment and per environment (_staleness_timing,
-- macros/09_learning.sql, where they are defined).
SELECT
    step, samples, in_flight_s_mean, in_flight_s_p90, queued_s_mean, queued_s_p90, staleness_mean,
    in_flight_versions_mean, queued_versions_mean
FROM _staleness_timing($run_id)
WHERE ($step_lo IS NULL OR step >= $step_lo)
  AND ($step_hi IS NULL OR step <= $step_hi)
  AND CASE WHEN $environment IS NULL THEN all_environments ELSE environment = $environment END
ORDER BY step
