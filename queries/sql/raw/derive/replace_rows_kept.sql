-- A fragment (not run by itself): a blocked table's previous rows in the parts @files that the catch-up keeps
-- (not of its scope, @scope), each with the block its part holds (catch_up._replace_rows).
SELECT * EXCLUDE (filename), regexp_extract(filename, '/b=([^/]+)/[^/]+$', 1) AS _block
FROM read_parquet(@files, filename = true, hive_partitioning = false)
WHERE NOT @scope
