-- A state whose trace index was not kept sorted by key: its parts' rows as they are, to be rewritten as one
-- part sorted by trace (catch_up._key_index); its keys follow (index_keys.sql).
CREATE OR REPLACE TEMP TABLE _idx_merged AS SELECT * FROM _old__traces;
