-- What an incremental catch-up (queries/catch_up.py) needs besides the tables, from every span of the run:
-- _traces_mat, the trace index: per trace and rollout id its spans carry (NULL: none), that rollout's group
-- (from its rl.rollout span), the first start and last end of those spans, so the spans of a scoped trace are read from the few segments of its time and no
-- scan of the run; _train_spans_mat, the raw rl.train_step and rl.weight_sync spans (one or two per step),
-- which every step assignment and step window reads whole.
CREATE OR REPLACE TABLE _traces_mat AS
SELECT * FROM _trace_index($run);
CREATE OR REPLACE TABLE _train_spans_mat AS
SELECT * FROM raw_spans WHERE run_id = $run AND name IN ('rl.train_step', 'rl.weight_sync');
-- The run-wide facts a scoped derivation must be told (scope_spans.sql adds them back as placeholder rows):
-- the staleness bound rollout_stages judges freshness against, whether the trainer records rl.sample spans
-- (rollout_steps reads them or step timing, never both), and spans whose rows no scope can find again
-- (scoring spans of no rollout).
SELECT
    max(staleness_bound) AS bound,
    count(*) FILTER (name = 'rl.sample' AND rollout_id IS NOT NULL) > 0 AS samples,
    count(*) FILTER (name IN ('rl.reward', 'rl.judge', 'rl.rollout') AND rollout_id IS NULL) AS orphans,
    count(*) AS spans
FROM raw_spans
WHERE run_id = $run;
