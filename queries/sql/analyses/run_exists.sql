-- Whether the run's derived state records a span of it: a process that wrote one (_process_activity, one row
-- per writing process of the run, derived from every span). Milliseconds, where asking the raw spans binds
-- every segment of the run (60 ms of every report at 30M spans). When it records none (not derived yet, or a
-- connection without derived state), analyses.require_run asks the raw spans (run_spans.sql).
SELECT EXISTS (SELECT 1 FROM _process_activity($run_id)) AS run_exists
