-- The tables (not views) of the derivation's database: which derived tables are still the scoped rows a
-- catch-up derived (refresh.read_final) and which a view over parts already, and which a derivation drops
-- before it points their name at Parquet parts (pieces._point).
SELECT table_name FROM duckdb_tables();
