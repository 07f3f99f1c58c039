-- Where compute_busy's run-wide union changes (refresh.refresh_tail): the first start of a scoped step's
-- islands or of work of no step, in the previous rows and in the final ones.
SELECT min(start_ns) AS t0 FROM (
    SELECT start_ns FROM _old_step_islands WHERE step IN (SELECT step FROM _scope_steps)
    UNION ALL SELECT start_ns FROM _old_work WHERE step IS NULL
    UNION ALL SELECT start_ns FROM _final_step_islands WHERE step IN (SELECT step FROM _scope_steps)
    UNION ALL SELECT start_ns FROM _final_work WHERE step IS NULL
);
