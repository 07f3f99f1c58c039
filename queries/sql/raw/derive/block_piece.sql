-- _block_piece(block, piece): the piece each numbered block is cut into (pieces._pieces), for plan_pieces.sql.
CREATE OR REPLACE TABLE _block_piece (block BIGINT, piece INTEGER);
INSERT INTO _block_piece SELECT unnest($blocks::BIGINT[]), unnest($pieces::INTEGER[]);
