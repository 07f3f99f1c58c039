-- Steps added to the scope ($steps: those scoped rollouts moved to).
INSERT INTO _scope_steps SELECT unnest($steps);
