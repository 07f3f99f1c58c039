-- The rows a blocked table is about to write, each with its _block (parquet_parts.write_blocked).
CREATE OR REPLACE TEMP VIEW _writing AS @relation;
