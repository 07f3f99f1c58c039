-- Definitions kept in the user's cache (keep.sql), copied into this database: DuckDB creates them as
-- stored, without binding each view and macro again through everything it reads (queries/definition_cache.py).
ATTACH $path AS _definitions (READ_ONLY);
COPY FROM DATABASE _definitions TO memory (SCHEMA);
DETACH _definitions;
