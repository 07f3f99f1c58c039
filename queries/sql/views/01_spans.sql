-- Every span: ids, name, times, status, a typed column per convention (docs/semconv.md), and every other
-- attribute kept as JSON.
CREATE OR REPLACE VIEW spans AS
SELECT
    run_id,
    lower(hex(trace_id)) AS trace_id,
    * EXCLUDE (run_id, trace_id, attributes, resource_attributes, events),
    make_timestamp_ns(start_ns) AS start_time,
    make_timestamp_ns(end_ns) AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    attributes::JSON AS attributes,
    resource_attributes::JSON AS resource_attributes,
    events::JSON AS events
FROM raw_spans;
