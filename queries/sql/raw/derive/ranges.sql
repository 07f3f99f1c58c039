-- Each live segment's first start and last end (_ranges), from the manifest or the segments' footers: what
-- reading a scope's or a piece's spans tests each segment's time range against.
CREATE OR REPLACE TABLE _ranges (segment VARCHAR, lo_ns BIGINT, hi_ns BIGINT);
INSERT INTO _ranges SELECT unnest($segments::VARCHAR[]), unnest($los::BIGINT[]), unnest($his::BIGINT[]);
