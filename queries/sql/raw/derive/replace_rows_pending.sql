-- A fragment (not run by itself): a table's previous rows of no consuming step (block p, in @files) that the
-- catch-up keeps (not of its scope, @scope: naming o.rollout_id), each to the block of its rollout's step in the
-- previous state (_prior_steps; p again when it has none).
SELECT o.*, _block_of(s.step, @block_steps) AS _block
FROM read_parquet(@files, hive_partitioning = false) AS o
LEFT JOIN _prior_steps AS s USING (rollout_id)
WHERE NOT @scope
