-- Whether the store holds any span of the run (analyses raise UnknownRunError otherwise).
SELECT EXISTS (SELECT 1 FROM spans WHERE run_id = $run_id) AS run_exists
