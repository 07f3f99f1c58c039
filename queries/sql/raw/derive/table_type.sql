-- Whether a relation is a table or a view ('BASE TABLE', 'VIEW'; no row: neither), before a derivation
-- points it at Parquet parts (pieces._point): a table is dropped first, a view replaced.
SELECT table_type FROM information_schema.tables WHERE table_name = $name;
