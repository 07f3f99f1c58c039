-- An incremental catch-up's scope (queries/derive.py): what the run's new spans (_new) can change. Run after
-- scope_seed.sql, repeatedly until nothing is added (each pass reads only small tables):
--   * the steps of the scoped rollouts (their rows leave those steps' aggregates), whatever block holds them
--     (_prior_steps: every rollout's consuming step in the previous state; _stepped holds only the scoped
--     blocks, so a rollout that moves to a step of another block would leave its old rows behind);
--   * every rollout and trace with rows at a scoped step or not consumed yet (step NULL): a step's aggregates
--     are derived again from all of that step's rollouts and turns (_stepped: the previous state's rows of the
--     scoped steps' blocks, put in place by derive.py);
--   * every member of a scoped rollout's group (stages judge a group's rewards together; step timing waits
--     for the whole group);
--   * the traces holding a scoped rollout's spans, and every rollout whose spans a scoped trace holds (a span
--     without rl.rollout.id joins the one rollout of its trace, and a second rollout there undoes it).
CREATE OR REPLACE TABLE _scope_steps AS
SELECT step FROM _scope_steps
UNION
SELECT step FROM _stepped WHERE step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _scope_rollouts)
UNION
SELECT step FROM _prior_steps WHERE rollout_id IN (SELECT rollout_id FROM _scope_rollouts);
CREATE OR REPLACE TABLE _scope_rollouts AS
SELECT rollout_id FROM _scope_rollouts
UNION
SELECT rollout_id FROM _stepped
WHERE rollout_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps))
UNION
SELECT rollout_id FROM _idx
WHERE group_id IN (SELECT group_id FROM _idx SEMI JOIN _scope_rollouts USING (rollout_id))
UNION
SELECT rollout_id FROM _idx
WHERE rollout_id IS NOT NULL AND trace_id IN (SELECT trace_id FROM _scope_traces);
CREATE OR REPLACE TABLE _scope_traces AS
SELECT trace_id FROM _scope_traces
UNION
SELECT unhex(trace_id) FROM _stepped
WHERE trace_id IS NOT NULL AND (step IS NULL OR step IN (SELECT step FROM _scope_steps))
UNION
SELECT trace_id FROM _idx WHERE rollout_id IN (SELECT rollout_id FROM _scope_rollouts);
SELECT (SELECT count(*) FROM _scope_steps) + (SELECT count(*) FROM _scope_rollouts)
    + (SELECT count(*) FROM _scope_traces) AS size;
