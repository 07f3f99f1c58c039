-- The kept definitions' file let go of when copying them in or out failed (queries/definition_cache.py).
DETACH DATABASE IF EXISTS _definitions;
