-- This database's definitions (views, macros, tables without their rows) written to the file $path, for the
-- next connections to copy in (copy_in.sql; queries/definition_cache.py).
ATTACH $path AS _definitions;
COPY FROM DATABASE memory TO _definitions (SCHEMA);
DETACH _definitions;
