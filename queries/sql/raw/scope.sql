-- An incremental catch-up's scope (queries/catch_up.py): what the run's new spans (_new) can change. Run after
-- scope_seed.sql, repeatedly until nothing is added (each pass reads only small tables). Three sets:
--   * changed rollouts (_scope_changed), whose own rows may differ from the previous state's: the new spans'
--     rollouts, every rollout not consumed yet (a new train step may consume it), every member of a changed
--     rollout's group (stages judge a group's rewards together; a late member moves its group to a later
--     step), and every rollout of a changed trace (a span without rl.rollout.id joins the one rollout of its
--     trace, and a second rollout there undoes it); a changed trace: one with new spans or a changed
--     rollout's;
--   * scoped steps: the steps of the changed rollouts, whatever block holds them (_prior_steps: every
--     rollout's consuming step in the previous state; _stepped holds only the scoped blocks, so a rollout
--     that moves to a step of another block would leave its old rows behind). Their rows leave those
--     steps' aggregates, which are derived again from all of the step's rollouts and turns;
--   * scoped rollouts (_scope_rollouts, whose rows the catch-up replaces): the changed ones and every rollout
--     with rows at a scoped step or not consumed yet (_stepped: the previous state's rows of the scoped
--     steps' blocks, put in place by derive.py).
-- A rollout scoped only for its step's aggregates is unchanged, and so is its group: the group's other
-- members are read (_scope_traces: every trace whose spans the derivation reads, theirs whole, so that
-- they are derived as a fresh reader derives them, consuming step included, and so are the scoped rows
-- that judge them together), but their steps do not join the scope, and the catch-up keeps their rows. They did before, and
-- where groups straddle steps (members consumed by different train steps) each pass took in the next step
-- back: the scope closed over the whole run, and a 1k-span catch-up of a 1M-span run took 150 s.
CREATE OR REPLACE TABLE _scope_changed AS
SELECT rollout_id FROM _scope_changed
UNION
SELECT rollout_id FROM _stepped WHERE rollout_id IS NOT NULL AND step IS NULL
UNION
SELECT rollout_id FROM _idx
WHERE group_id IN (SELECT group_id FROM _idx SEMI JOIN _scope_changed USING (rollout_id))
UNION
SELECT rollout_id FROM _idx
WHERE rollout_id IS NOT NULL AND trace_id IN (SELECT trace_id FROM _changed_traces);
CREATE OR REPLACE TABLE _changed_traces AS
SELECT trace_id FROM _changed_traces
UNION
SELECT trace_id FROM _idx WHERE rollout_id IN (SELECT rollout_id FROM _scope_changed);
CREATE OR REPLACE TABLE _scope_steps AS
SELECT step FROM _scope_steps
UNION
SELECT step FROM _stepped WHERE step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _scope_changed)
UNION
SELECT step FROM _prior_steps WHERE rollout_id IN (SELECT rollout_id FROM _scope_changed);
CREATE OR REPLACE TABLE _scope_rollouts AS
SELECT rollout_id FROM _scope_changed
UNION
SELECT rollout_id FROM _stepped
WHERE rollout_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps));
CREATE OR REPLACE TABLE _scope_traces AS
SELECT trace_id FROM _changed_traces
UNION
SELECT unhex(trace_id) FROM _stepped
WHERE trace_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps))
UNION
SELECT trace_id FROM _idx  -- every trace of each scoped rollout's group members (their samples' too)
WHERE rollout_id IN (
    SELECT rollout_id FROM _idx
    WHERE group_id IN (SELECT group_id FROM _idx SEMI JOIN _scope_rollouts USING (rollout_id))
       OR rollout_id IN (SELECT rollout_id FROM _scope_rollouts)
);
SELECT (SELECT count(*) FROM _scope_changed) + (SELECT count(*) FROM _scope_steps)
    + (SELECT count(*) FROM _scope_rollouts) + (SELECT count(*) FROM _scope_traces) AS size;
