-- The previous consuming step of each wanted rollout, from rollout_steps' parts ($files): a semi-join over two
-- narrow columns, not every rollout's step. One row per rollout (a rollout at two steps, in a part not rewritten
-- yet, keeps one): catch_up._replace_rows joins on it.
INSERT INTO _prior_steps
SELECT rollout_id, any_value(step) FROM read_parquet($files, hive_partitioning = false)
WHERE step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _prior_wanted)
GROUP BY ALL;
