-- Whether the store holds any span of the run, read from its raw segments (analyses raise UnknownRunError
-- otherwise; run_exists.sql answers first from the derived state).
SELECT EXISTS (SELECT 1 FROM spans WHERE run_id = $run_id) AS run_exists
