-- Train span parts merged (catch_up._index_parts): every row of @rows, into @target.
CREATE OR REPLACE TEMP TABLE @target AS SELECT * FROM @rows;
