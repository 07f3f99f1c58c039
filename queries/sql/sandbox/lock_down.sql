-- The SQL explorer's connection, locked down in this order (each step needs the one before):
-- no spilling to a temp directory (it would be one more writable, readable place), only the store's
-- directories readable, no other file or network access, and no statement may change any of it back.
SET memory_limit = $memory_limit;
SET temp_directory = '';
SET allowed_directories = $read_paths;
SET enable_external_access = false;
SET lock_configuration = true;
