-- Exported / dropped / failed span counts per writing process, and the message rows it wrote (transcripts) and
-- left out by its group sample: the latest cumulative snapshot of each.
CREATE OR REPLACE VIEW collector_stats AS
SELECT
    run_id, source, service_name, instance_id, role, pid, make_timestamp_ns(time_ns) AS time,
    spans_received, spans_exported, spans_dropped, spans_failed, attributes_kept_untyped, segments_published,
    messages_exported, messages_sampled_out
FROM raw_collector_stats
QUALIFY row_number() OVER (PARTITION BY run_id, source, instance_id, pid ORDER BY time_ns DESC) = 1;
