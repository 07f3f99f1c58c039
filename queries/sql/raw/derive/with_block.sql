-- A fragment (not run by itself): rows of @relation (which has a step column) that satisfy @where, with the
-- block of their step as _block, the part they are written to (parquet_parts.with_block).
SELECT *, _block_of(step, @block_steps) AS _block FROM @relation WHERE @where
