-- The traces holding the rollout and group ids $keys, in the index rows _found read by key (catch_up._Index):
-- a rollout's rows give its group, a group's its members.
SELECT DISTINCT trace_id FROM _found WHERE key IN (SELECT unnest($keys));
