-- The raw spans a "rederive" table (queries/tables.py) is computed from after an incremental catch-up, kept
-- in the derived tables rather than read from the run's segments: every rl.turn (turns), rl.rollout
-- (rollouts), rl.train_step and rl.weight_sync (the raw rows of _train_spans), with the columns those keep.
-- (@schema: the empty span segment, for every raw column.)
CREATE OR REPLACE VIEW raw_spans AS
SELECT * FROM read_parquet(@schema, hive_partitioning = true, union_by_name = true, hive_types = {'run_id': 'VARCHAR'})
UNION ALL BY NAME
SELECT run_id, name, start_ns, end_ns, status_code, service_name, instance_id, role, devices, model_name,
       model_parameters, rollout_id, turn_index
FROM _turns_mat WHERE name = 'rl.turn'
UNION ALL BY NAME
SELECT run_id, 'rl.rollout' AS name, start_ns, end_ns, service_name, instance_id, rollout_id, task_id, group_id,
       environment, policy_version
FROM _rollouts_mat
UNION ALL BY NAME
SELECT * FROM _train_spans_mat;
