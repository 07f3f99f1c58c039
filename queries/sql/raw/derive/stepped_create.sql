-- _stepped(step, rollout_id, trace_id): the previous rows of the scoped blocks that name a rollout or a trace,
-- which scope.sql reads (catch_up._stepped); filled block by block as the scope grows.
CREATE OR REPLACE TABLE _stepped (step BIGINT, rollout_id VARCHAR, trace_id VARCHAR);
