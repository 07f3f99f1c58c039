-- A view over a derived table's Parquet parts (derive_db.view). @select casts each FLOP sum stored as
-- DECIMAL(38, 0) back to the HUGEINT it was; views take no parameters, so the files are a literal list.
CREATE OR REPLACE VIEW @name AS
SELECT @select FROM read_parquet(@files, hive_partitioning = false, union_by_name = true);
