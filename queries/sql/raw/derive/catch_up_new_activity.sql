-- The new spans' own process activity (merged with the previous rows by merge_process_activity.sql), and every
-- train step and weight sync of the run, previous and new: read once, by scope_spans.sql into the scoped spans
-- (_train_spans_mat reads them there).
CREATE TABLE _new_process_activity AS SELECT * FROM _process_activity_src($run);
CREATE VIEW _train_all AS
SELECT * FROM _old__train_spans
UNION ALL BY NAME
SELECT * FROM _new WHERE name IN ('rl.train_step', 'rl.weight_sync');
