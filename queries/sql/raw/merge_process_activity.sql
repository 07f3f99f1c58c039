-- process_activity after new spans: the previous rows (_old_process_activity) and the new spans' own
-- (_new_process_activity, _process_activity_src over them alone) merged per process: counts add up, the
-- first start and last end are the extremes, the role and service name the least by name. Exactly what
-- _process_activity_src gives over every span.
SELECT
    $run AS run_id, instance_id, min(service_name) AS service_name, min(role) AS role,
    max(devices) AS devices, sum(spans)::BIGINT AS spans, min(first_start_ns) AS first_start_ns,
    max(last_end_ns) AS last_end_ns
FROM (
    SELECT * FROM _old_process_activity
    UNION ALL BY NAME
    SELECT * FROM _new_process_activity
)
GROUP BY instance_id;
