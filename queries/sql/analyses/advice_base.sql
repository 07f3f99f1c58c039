-- The advisor's measured starting point (docs/advisor.md): funnel counts and rates over the consumed rollouts,
-- device-seconds and work-seconds per term, usable rollouts per device-second (usable_per_device_s, the figure
-- every lever's gain is relative to), train seconds per token; defined in macros/10_advice.sql.
SELECT * FROM _advice_base($run_id, $step_lo, $step_hi)
