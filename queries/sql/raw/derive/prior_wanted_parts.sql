-- The rollouts of a table's parts of no consuming step ($files, block p) not asked for yet (_prior_wanted), whose
-- rows catch_up._replace_rows moves to their steps' blocks. Answers how many.
CREATE OR REPLACE TEMP TABLE _prior_wanted AS
SELECT rollout_id FROM read_parquet($files, hive_partitioning = false)
WHERE rollout_id IS NOT NULL
EXCEPT SELECT rollout_id FROM _prior_asked;
SELECT count(*) AS wanted FROM _prior_wanted;
