-- A working table dropped once read (pieces: a piece's rows being written, a plan table a view replaces).
DROP TABLE IF EXISTS @table;
