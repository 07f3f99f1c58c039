-- A "merge" table's rows after a catch-up (@query: its raw/merge_<table>.sql, previous rows and new merged),
-- to be written whole.
CREATE OR REPLACE TEMP TABLE _merged AS @query;
