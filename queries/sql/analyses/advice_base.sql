-- The advisor's measured starting point (docs/advisor.md): funnel counts and rates over the consumed rollouts,
-- device-seconds and work-seconds per term, train seconds per token; defined in macros/10_advice.sql.
SELECT * FROM _advice_base($run_id, $step_lo, $step_hi)
