-- Rebuild the materialized views of the runs whose segments changed (rollouts first: turns join them).
DELETE FROM _rollouts_mat WHERE run_id IN (SELECT unnest($runs));
INSERT INTO _rollouts_mat SELECT * FROM _rollouts_src WHERE run_id IN (SELECT unnest($runs));
DELETE FROM _turns_mat WHERE run_id IN (SELECT unnest($runs));
INSERT INTO _turns_mat SELECT * FROM _turns_src WHERE run_id IN (SELECT unnest($runs));
