-- _labels(_block, label, piece): each block's part label in the run's layout and the piece writing its rows
-- (one list per column, in step), which pieces._write_parts joins each row's block with.
CREATE OR REPLACE TABLE _labels (_block VARCHAR, label VARCHAR, piece INTEGER);
INSERT INTO _labels SELECT unnest($blocks::VARCHAR[]), unnest($labels::VARCHAR[]), unnest($pieces::INTEGER[]);
