-- What one run's new segments can change, so a refresh re-derives only that (reader.py):
-- the rollouts they mention, the rollouts of their traces (a span without rl.rollout.id joins the one rollout
-- of its trace, as vLLM turns do, and a second rollout in that trace undoes it),
-- rollouts a new train step can take (not consumed yet, or by a later step), and every member of those
-- rollouts' groups (stages judge a group's rewards together; derived steps wait for the whole group).
DELETE FROM _delta.scope_rollouts;
INSERT INTO _delta.scope_rollouts
WITH new AS (
    SELECT name, rollout_id, group_id, trace_id, train_step
    FROM main._spans
    WHERE run_id = $run AND _segment IN (SELECT unnest($segments))
),
first_new_step AS (
    SELECT min(train_step) AS step FROM new WHERE name = 'rl.train_step'
),
touched AS (
    SELECT rollout_id FROM new WHERE rollout_id IS NOT NULL
    UNION
    SELECT rollout_id FROM main._rollouts_mat  -- (its rollouts seen so far; new ones are in new)
    WHERE run_id = $run AND trace_id IN (SELECT lower(hex(trace_id)) FROM new)
    UNION
    SELECT s.rollout_id FROM main._rollout_steps_mat AS s, first_new_step AS f
    WHERE s.run_id = $run AND f.step IS NOT NULL AND (s.step IS NULL OR s.step >= f.step)
),
groups AS (
    SELECT group_id FROM main._rollouts_mat
    WHERE run_id = $run AND group_id IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM touched)
    UNION
    SELECT group_id FROM new WHERE name = 'rl.rollout' AND group_id IS NOT NULL
)
SELECT rollout_id FROM touched
UNION
SELECT rollout_id FROM main._rollouts_mat WHERE run_id = $run AND group_id IN (SELECT group_id FROM groups);
-- The traces whose turns are re-linked: those of the new spans and of the scoped rollouts.
DELETE FROM _delta.scope_traces;
INSERT INTO _delta.scope_traces
SELECT trace_id FROM main._spans WHERE run_id = $run AND _segment IN (SELECT unnest($segments))
UNION
SELECT trace_id FROM main._spans
WHERE run_id = $run AND name = 'rl.rollout' AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts);
-- Their spans: picked by rowid, one cheap semi-join per reason, then fetched whole once (an OR of the
-- reasons scans every column). The rows are mostly recent, so the fetch skips most of the table.
DELETE FROM _delta.raw_spans;
INSERT INTO _delta.raw_spans
WITH picked AS (
    SELECT rowid AS row FROM main._spans
    WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM _delta.scope_rollouts)
    UNION
    SELECT rowid FROM main._spans WHERE run_id = $run AND trace_id IN (SELECT trace_id FROM _delta.scope_traces)
)
SELECT * EXCLUDE (_segment) FROM main._spans WHERE rowid IN (SELECT row FROM picked);
-- rollout_steps reads recorded decisions only in a run that records them: in such a run, one rl.sample span
-- that belongs to no rollout tells the _delta views so.
INSERT INTO _delta.raw_spans (run_id, name, rollout_id) SELECT $run, 'rl.sample', '' WHERE $recorded;
-- New train steps join the run's (the _delta views read train steps from main._train_steps_mat).
DELETE FROM main._train_steps_mat AS m USING _delta._train_steps_src AS d
WHERE m.run_id = $run AND m.trace_id = d.trace_id AND m.span_id = d.span_id;
INSERT INTO main._train_steps_mat SELECT * FROM _delta._train_steps_src;
