-- What the pieces derive again from their own spans, and the plan's working tables, not held in the plan's
-- database while they run.
CREATE OR REPLACE TABLE _rollouts_mat AS SELECT * FROM _rollouts_mat LIMIT 0;
CREATE OR REPLACE TABLE _rollout_steps_mat AS SELECT * FROM _rollout_steps_mat LIMIT 0;
DROP TABLE IF EXISTS _rollout_piece;
DROP TABLE IF EXISTS _piece_groups;
DROP TABLE IF EXISTS _piece_traces;
DROP TABLE IF EXISTS _piece_ranges;
DROP TABLE IF EXISTS _loose;
DROP TABLE IF EXISTS _loose_traces;
