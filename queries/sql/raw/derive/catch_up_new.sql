-- A catch-up's new spans of the run (_new), read once from the new segments, and raw_spans pointed at them:
-- the scope is seeded from them (scope_seed.sql) and the run's index and process activity take their rows.
CREATE TABLE _new AS SELECT * FROM raw_spans WHERE run_id = $run;
CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _new;
