-- The columns and types of Parquet parts read together (derive_db.view): a FLOP sum stored as DECIMAL(38, 0)
-- is read back as HUGEINT, so the view's select list is made from these.
DESCRIBE SELECT * FROM read_parquet(@files, hive_partitioning = false, union_by_name = true);
