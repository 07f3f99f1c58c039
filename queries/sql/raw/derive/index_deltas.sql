-- What a catch-up adds to the index (catch_up._merge): the index rows of the traces the new spans touched
-- (merged into _idx_delta by index_traces.sql), and the new train steps and weight syncs.
CREATE OR REPLACE TEMP VIEW _idx_touched AS
SELECT * FROM _idx SEMI JOIN (SELECT DISTINCT trace_id FROM _new) AS n USING (trace_id);
CREATE OR REPLACE TEMP VIEW _train_delta AS
SELECT * FROM _new WHERE name IN ('rl.train_step', 'rl.weight_sync');
