-- A "rederive" table's rows from the tables written so far (@source: its declared relation, which may read
-- $run), to be written whole (refresh.rederive).
CREATE OR REPLACE TEMP TABLE _merged AS SELECT $run AS run_id, * FROM @source;
