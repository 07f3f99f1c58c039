-- The rows of every blocked table's parts read this pass (stepped_select.sql each, @selects their union), in
-- one statement: one scan of each part, not one statement per table.
INSERT INTO _stepped @selects;
