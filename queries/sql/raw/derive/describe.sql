-- A relation's columns and types (column_name, column_type, ...), for the select list that stores it as
-- Parquet (derive_db.stored), the columns a rule tests for (column_names) and the manifest's schemas.
DESCRIBE @relation;
