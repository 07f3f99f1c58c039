-- The steps derive_delta.sql touched, as the list derive_steps.sql takes.
SELECT coalesce(list(DISTINCT step), []::BIGINT[]) FROM _delta.scope_steps
