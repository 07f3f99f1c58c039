-- Where rollout_goodput's sweep starts again: the start of the last step window starting at or before $t0 (the
-- first new start, or the end a resumed process was idle from), and the first window's start. A window starts
-- where its step does: at the first of the step's rows (one per trainer process).
CREATE OR REPLACE TEMP VIEW _old_step_starts AS
SELECT train_step, min(start_ns) AS start_ns FROM _old_train_steps
WHERE train_step IS NOT NULL
GROUP BY train_step;
SELECT max(start_ns) FILTER (start_ns <= $t0) AS from_ns, min(start_ns) AS first_ns FROM _old_step_starts;
