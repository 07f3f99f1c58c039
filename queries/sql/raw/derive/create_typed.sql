-- An empty derived table typed from the schemas a derivation was given (the shipped ones or a manifest's;
-- derive_db.connection): creating it from its definition would bind every view and macro beneath it.
-- @columns: each column as CAST(NULL AS <its DuckDB type>) AS "<name>".
CREATE TABLE @table AS SELECT @columns WHERE false;
