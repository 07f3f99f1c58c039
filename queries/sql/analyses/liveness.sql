-- Liveness per process (docs/metrics.md, "Health"): each writing process (service.instance.id), its spans,
-- when its last span ended and how long it has been silent: silent_s = now − the end of its last span.
-- "Now" is $now_ns when given (`rollscope check --now wall`: wall-clock now, for a live run) and otherwise
-- the end of the run's newest span (as_of_ns), which is close to wall-clock now while a run is being
-- written and keeps a finished run's figures meaningful. The most silent process comes first.
WITH acts AS (SELECT * FROM _process_activity($run_id)),
as_of AS (SELECT coalesce($now_ns, max(last_end_ns)) AS now_ns FROM acts)
SELECT
    a.instance_id, a.service_name, a.role, a.devices, a.spans,
    make_timestamp_ns(a.last_end_ns) AS last_span_time,
    (n.now_ns - a.last_end_ns) / 1e9 AS silent_s,
    n.now_ns AS as_of_ns
FROM acts AS a, as_of AS n
ORDER BY silent_s DESC, a.instance_id
