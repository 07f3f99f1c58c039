-- Schema _delta: the views and macros again (reader.py creates them here with search_path '_delta,main'),
-- over raw_spans = only the spans a refresh must re-derive, so derivation costs the new data, not the run.
CREATE SCHEMA _delta;
CREATE TABLE _delta.raw_spans AS SELECT * EXCLUDE (_segment) FROM main._spans LIMIT 0;
CREATE VIEW _delta.raw_collector_stats AS SELECT * FROM main.raw_collector_stats;
CREATE TABLE _delta.scope_rollouts (rollout_id VARCHAR);
CREATE TABLE _delta.scope_traces (trace_id BLOB);
CREATE TABLE _delta.scope_steps (step BIGINT);
