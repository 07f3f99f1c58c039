-- Each process's bounds as the previous state's manifest keeps them (one list per column, in step), before the
-- scoped rows' are merged in (proc_bounds_merge.sql).
CREATE OR REPLACE TABLE _proc_bounds (instance_id VARCHAR, lo BIGINT, hi BIGINT, devices DOUBLE, has_turns BOOLEAN);
INSERT INTO _proc_bounds
SELECT unnest($instances::VARCHAR[]), unnest($los::BIGINT[]), unnest($his::BIGINT[]),
    unnest($devices::DOUBLE[]), unnest($has_turns::BOOLEAN[]);
