INSERT INTO _collector_stats BY NAME
SELECT r.* EXCLUDE (filename), m._segment
FROM read_parquet($files, hive_partitioning = true, union_by_name = true, filename = true,
    hive_types = {'run_id': 'VARCHAR'}) AS r
JOIN _segment_ids AS m USING (filename);
