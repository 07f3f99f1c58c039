-- After derive_delta.sql: recompute the turn sums (queries/sql/analyses/macros/06_turn_sums.sql) of the steps
-- it touched ($steps, from scope_steps.sql, maybe none) and of the pending turns, which any refresh can change.
DELETE FROM _turn_sums_mat WHERE run_id = $run AND (step IS NULL OR list_contains($steps::BIGINT[], step));
INSERT INTO _turn_sums_mat
SELECT $run, * FROM _turn_sums_src($run, $steps::BIGINT[]);
