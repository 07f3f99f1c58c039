-- Index key parts merged (catch_up._index_parts): the distinct (key, trace) pairs of @rows, into @target.
CREATE OR REPLACE TEMP TABLE @target AS SELECT DISTINCT * FROM @rows;
