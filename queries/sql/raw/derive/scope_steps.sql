-- The steps of a catch-up's scope (their blocks, and block p, are the parts it rewrites).
SELECT step FROM _scope_steps;
