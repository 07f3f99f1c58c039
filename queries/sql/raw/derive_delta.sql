-- Replace one run's derived rows for the scoped rollouts and traces (derive_scope.sql) with rows derived from
-- their spans alone. Runs with search_path '_delta,main': the views and macros named here read _delta.
-- The steps whose compute tables derive_steps.sql recomputes: those the scoped rollouts were consumed by...
DELETE FROM _delta.scope_steps;
INSERT INTO _delta.scope_steps
SELECT step FROM main._rollout_steps_mat
WHERE run_id = $run AND step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
DELETE FROM main._rollouts_mat
WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
INSERT INTO main._rollouts_mat
SELECT * FROM _delta._rollouts_src WHERE rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
DELETE FROM main._rollout_steps_mat
WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
INSERT INTO main._rollout_steps_mat
SELECT $run, * FROM _delta._rollout_steps_src($run) WHERE rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
DELETE FROM main._turns_mat
WHERE rowid IN (
    SELECT rowid FROM main._turns_mat
    WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts)
    UNION
    SELECT rowid FROM main._turns_mat
    WHERE run_id = $run AND trace_id IN (SELECT lower(hex(trace_id)) FROM _delta.scope_traces)
);
-- The scoped traces' turns, at the steps main._rollout_steps_mat now gives (as the work rows below).
INSERT INTO main._turns_mat
SELECT t.*, c.step FROM _delta._turns_src AS t
LEFT JOIN main._rollout_steps_mat AS c ON c.run_id = $run AND c.rollout_id = t.rollout_id;
DELETE FROM main._rollout_stages_mat
WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
INSERT INTO main._rollout_stages_mat
SELECT $run, * FROM _delta._rollout_stages_src($run) WHERE rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
-- ...the steps they are consumed by now, and new train steps.
INSERT INTO _delta.scope_steps
SELECT step FROM main._rollout_steps_mat
WHERE run_id = $run AND step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
INSERT INTO _delta.scope_steps
SELECT train_step FROM main._spans
WHERE run_id = $run AND _segment IN (SELECT unnest($segments)) AND name = 'rl.train_step' AND train_step IS NOT NULL;
DELETE FROM main._rollout_work_mat
WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
INSERT INTO main._rollout_work_mat
SELECT $run, * FROM _delta._rollout_work_staged($run) WHERE rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
-- The work rows of the scoped rollouts and traces, and every train step (_delta reads them all), at the steps
-- main._rollout_steps_mat now gives: a rollout in a scoped trace but not scoped itself kept its step.
DELETE FROM main._work_mat
WHERE rowid IN (
    SELECT rowid FROM main._work_mat
    WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts)
    UNION
    SELECT rowid FROM main._work_mat WHERE run_id = $run AND term = 'train'
    UNION
    SELECT rowid FROM main._work_mat
    WHERE run_id = $run AND trace_id IN (SELECT lower(hex(trace_id)) FROM _delta.scope_traces)
);
INSERT INTO main._work_mat
SELECT $run, w.*, _work_step(w.term, w.train_step, c.step), c.environment
FROM _delta._work_rows_src($run) AS w
LEFT JOIN main._rollout_steps_mat AS c ON c.run_id = $run AND c.rollout_id = w.rollout_id;
