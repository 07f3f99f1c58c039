-- The tables (not views) of the derivation's database: which derived tables are still the scoped rows a
-- catch-up derived (refresh.read_final) and which a view over parts already.
SELECT table_name FROM duckdb_tables();
