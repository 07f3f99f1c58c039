-- Staleness over time (docs/metrics.md, "Staleness and throughput"): per consuming step, over its consumed
-- samples, where their staleness comes from. In flight: from the rollout's dispatch (its span's start) to its
-- end, in seconds, and in policy versions produced meanwhile (the newest version a finished train step had
-- produced by the rollout's end, less the rollout's policy_version). Queued: from its end to its consuming
-- step's data being ready (start + train_wait_s), in seconds, and the rest of its staleness in versions
-- (staleness − in flight). prime-rl logs the same split as off_policy/in_flight and off_policy/in_queue.
WITH consumed AS (
    SELECT s.rollout_id, s.step, s.staleness, s.policy_version, r.start_ns, r.end_ns
    FROM rollout_steps($run_id) AS s
    JOIN rollouts AS r ON r.run_id = $run_id AND r.rollout_id = s.rollout_id
    WHERE s.step IS NOT NULL AND s.staleness IS NOT NULL
      AND ($step_lo IS NULL OR s.step >= $step_lo)
      AND ($step_hi IS NULL OR s.step <= $step_hi)
      AND ($environment IS NULL OR s.environment = $environment)
),
train AS (
    SELECT
        train_step, end_ns, policy_version,
        start_ns + CAST(round(coalesce(train_wait_s, 0) * 1e9) AS BIGINT) AS ready_ns
    FROM train_steps
    WHERE run_id = $run_id AND train_step IS NOT NULL
),
produced AS (  -- the newest version produced by a train step that had ended by the rollout's end
    SELECT c.*, t.policy_version AS newest_version
    FROM consumed AS c
    ASOF LEFT JOIN (SELECT end_ns, policy_version FROM train WHERE policy_version IS NOT NULL) AS t
        ON c.end_ns >= t.end_ns
),
split AS (
    SELECT
        p.step,
        (p.end_ns - p.start_ns) / 1e9 AS in_flight_s,
        greatest(0, t.ready_ns - p.end_ns) / 1e9 AS queued_s,
        least(p.staleness, greatest(0, coalesce(p.newest_version, p.policy_version) - p.policy_version))
            AS in_flight_versions,
        p.staleness
    FROM produced AS p
    LEFT JOIN train AS t ON t.train_step = p.step
)
SELECT
    step,
    count(*) AS samples,
    avg(in_flight_s) AS in_flight_s_mean,
    quantile_cont(in_flight_s, 0.9) AS in_flight_s_p90,
    avg(queued_s) AS queued_s_mean,
    quantile_cont(queued_s, 0.9) AS queued_s_p90,
    avg(staleness) AS staleness_mean,
    avg(in_flight_versions) AS in_flight_versions_mean,
    avg(staleness - in_flight_versions) AS queued_versions_mean
FROM split
GROUP BY step
ORDER BY step
