-- The steps derive_delta.sql touched, as the list derive_steps.sql takes.
SELECT coalesce(list(DISTINCT step), []) FROM _delta.scope_steps
