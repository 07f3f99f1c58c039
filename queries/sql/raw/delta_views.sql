-- After the views and macros are created in _delta: the run's train steps come whole from the main tables.
CREATE OR REPLACE VIEW _delta.train_steps AS SELECT * FROM main._train_steps_mat;
