-- The seed of an incremental catch-up's scope (scope.sql grows it): the run's new spans (_new), the trace
-- index of their spans (_idx; queries/catch_up.py adds the previous state's rows of each trace and id the scope
-- looks up, index_wanted.sql, before each pass), and why the scoped path cannot be sure, if it cannot
-- (queries/catch_up.py then derives the run in full).
-- _idx keeps every part's rows as they are, not merged per trace and rollout: a trace touched by several
-- catch-ups has a row in each of their parts (and in the new spans'), and every lookup here is by set
-- membership (scope.sql) or takes a trace's extremes (derive.py), which repeated rows do not change.
CREATE OR REPLACE TABLE _idx AS
SELECT trace_id, rollout_id, group_id, lo_ns, hi_ns FROM _trace_index($run);
CREATE OR REPLACE TABLE _changed_traces AS SELECT DISTINCT trace_id FROM _new WHERE trace_id IS NOT NULL;
CREATE OR REPLACE TABLE _scope_traces AS SELECT * FROM _changed_traces;
CREATE OR REPLACE TABLE _scope_changed AS SELECT DISTINCT rollout_id FROM _new WHERE rollout_id IS NOT NULL;
CREATE OR REPLACE TABLE _scope_rollouts AS SELECT * FROM _scope_changed;
CREATE OR REPLACE TABLE _scope_steps AS
SELECT DISTINCT train_step AS step FROM _new
WHERE name IN ('rl.train_step', 'rl.sample') AND train_step IS NOT NULL;
WITH old_ready AS (
    SELECT max(start_ns + CAST(round(coalesce(train_wait_s, 0) * 1e9) AS BIGINT)) AS ready_ns
    FROM _old_train_steps
    WHERE train_step IS NOT NULL
),
new_ready AS (
    SELECT min(start_ns + CAST(round(coalesce(train_wait_s, 0) * 1e9) AS BIGINT)) AS ready_ns
    FROM _new
    WHERE name = 'rl.train_step' AND train_step IS NOT NULL
)
SELECT CASE
    WHEN NOT $samples AND EXISTS (SELECT 1 FROM _new WHERE name = 'rl.sample' AND rollout_id IS NOT NULL)
        THEN 'the run switched to recorded rl.sample decisions'
    WHEN (SELECT max(staleness_bound) FROM _new) > coalesce($bound, -9223372036854775807)
        THEN 'the staleness bound changed'
    WHEN EXISTS (SELECT 1 FROM _new WHERE name IN ('rl.reward', 'rl.judge', 'rl.rollout') AND rollout_id IS NULL)
        THEN 'a scoring or rollout span of no rollout'
    WHEN NOT $samples AND (SELECT ready_ns FROM new_ready) < (SELECT ready_ns FROM old_ready)
        THEN 'a train step older than the newest one'
END AS fallback;
