-- Spans the run's exporters dropped or failed to write: the latest cumulative count of each writing process
-- (view collector_stats), summed. The same figures as throughput's dropped_spans / failed_spans, for the
-- checks, which need only these.
SELECT
    coalesce(sum(spans_dropped), 0)::BIGINT AS dropped_spans,
    coalesce(sum(spans_failed), 0)::BIGINT AS failed_spans
FROM collector_stats
WHERE run_id = $run_id
