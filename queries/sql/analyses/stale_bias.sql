-- What dropping stale samples biases (docs/metrics.md, "Staleness and throughput"): rollouts that carried a
-- signal, kept (usable) against dropped for staleness (lost at the fresh stage as 'stale'): how many, their mean
-- decoded tokens, mean seconds from dispatch to end, mean reward and success rate (reward at least
-- $success_threshold). A dropped set longer, slower or harder than the kept one means dropping stale samples
-- trains the policy toward fast, short, easy problems.
SELECT
    CASE WHEN s.usable THEN 'kept' ELSE 'dropped stale' END AS samples,
    count(*) AS rollouts,
    avg(w.generated) AS decoded_tokens_mean,
    avg((r.end_ns - r.start_ns) / 1e9) AS duration_s_mean,
    avg(s.reward) AS reward_mean,
    avg(CASE WHEN s.reward >= $success_threshold THEN 1.0 ELSE 0.0 END) AS success_rate
FROM rollout_stages($run_id) AS s
JOIN rollouts AS r ON r.run_id = $run_id AND r.rollout_id = s.rollout_id
LEFT JOIN _rollout_work($run_id) AS w ON w.rollout_id = s.rollout_id
WHERE (s.usable OR (s.lost_at = 'fresh' AND s.lost_reason = 'stale'))
  AND ($step_lo IS NULL OR s.step >= $step_lo)
  AND ($step_hi IS NULL OR s.step <= $step_hi)
  AND ($environment IS NULL OR s.environment = $environment)
GROUP BY ALL
ORDER BY samples DESC
