-- Every train step and weight sync of the run, which the scoped spans hold (scope_spans.sql), as the train
-- spans the "run" tables read once the scope is merged (catch_up._merge).
CREATE OR REPLACE VIEW _train_spans_mat AS
SELECT * FROM _scoped WHERE name IN ('rl.train_step', 'rl.weight_sync');
