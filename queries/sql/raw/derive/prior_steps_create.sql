-- _prior_steps(rollout_id, step): each asked-for rollout's consuming step in the previous state, and
-- _prior_asked, the rollouts asked for so far (catch_up._PriorSteps: each is read once).
CREATE OR REPLACE TABLE _prior_steps (rollout_id VARCHAR, step BIGINT);
CREATE OR REPLACE TABLE _prior_asked (rollout_id VARCHAR);
