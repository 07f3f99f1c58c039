-- One row per run: how much it holds and when it was written.
CREATE OR REPLACE VIEW runs AS
SELECT
    run_id,
    count(*) AS spans,
    count(*) FILTER (WHERE name = 'rl.rollout') AS rollouts,
    -- distinct: a data-parallel trainer records each step once per process
    count(DISTINCT train_step) FILTER (WHERE name = 'rl.train_step') AS train_steps,
    make_timestamp_ns(min(start_ns)) AS first_time,
    make_timestamp_ns(max(end_ns)) AS last_time,
    count(DISTINCT instance_id) AS processes
FROM raw_spans
GROUP BY run_id;
