-- A fragment (not run by itself): rows of @relation (a table without a step column) that satisfy @where, with
-- the block of their rollout's consuming step as _block, from the rollout_steps rows @steps
-- (parquet_parts.with_block). @where names rollout_id as t.rollout_id.
SELECT t.*, _block_of(c.step, @block_steps) AS _block
FROM @relation AS t
LEFT JOIN (SELECT rollout_id, any_value(step) AS step FROM @steps GROUP BY ALL) AS c USING (rollout_id)
WHERE @where
