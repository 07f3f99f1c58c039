-- How many rows a relation holds (an index delta: written only when it holds any; catch_up._index_parts).
SELECT count(*) AS n FROM @relation;
