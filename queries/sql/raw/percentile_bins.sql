-- The values whose run-wide percentiles run_percentiles keeps (the rollouts' decoded tokens and seconds,
-- _rollout_tails; the turns' seconds, _turn_latency), counted per kind, environment and bin of value
-- (_percentile_bin: 256 bins per doubling, in value order) from @tails and @latency (the tables, or the rows a
-- catch-up replaces or adds). Kept in the derived index (_percentile_bins) and caught up by adding the new
-- rows' counts and taking away the replaced rows' (counts merge exactly), so a catch-up finds the bins
-- holding each percentile's ranks without sorting every value of the run (percentiles_from_bins.sql).
SELECT kind, environment, bin, sum(n)::BIGINT AS n
FROM (
    SELECT 'tokens' AS kind, environment, _percentile_bin(CAST(generated AS DOUBLE)) AS bin, count(*) AS n
    FROM @tails WHERE generated IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT 'seconds', environment, _percentile_bin(duration_s), count(*)
    FROM @tails WHERE duration_s IS NOT NULL GROUP BY ALL
    UNION ALL
    SELECT 'latency', environment, _percentile_bin(duration_s), count(*)
    FROM @latency WHERE duration_s IS NOT NULL GROUP BY ALL
)
GROUP BY ALL
