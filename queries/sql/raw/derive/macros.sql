-- The helpers every derivation's statements share, created with its database (queries/derive_db.connection).
-- _block_of: the block label of consuming step `step` in blocks of `size` steps ('p': no consuming step yet),
-- as store/derived.py's block_of gives it; the size is an argument, not a constant, because a test sets it.
CREATE OR REPLACE MACRO _block_of(step, size) AS
    CASE WHEN step IS NULL THEN 'p' ELSE CAST(floor(step / size) AS BIGINT)::VARCHAR END;
