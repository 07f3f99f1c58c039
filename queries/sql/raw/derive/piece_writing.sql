-- A table's rows (@relation, each with its _block) of piece $piece's blocks (NULL: every block), each with the
-- label of the part holding its block (_labels), to be written part by part (pieces._write_parts).
CREATE OR REPLACE TEMP TABLE _writing AS
SELECT w.* EXCLUDE (_block), l.label
FROM (@relation) AS w
JOIN (SELECT * FROM _labels WHERE $piece IS NULL OR piece = $piece) AS l ON l._block = w._block;
SELECT DISTINCT label FROM _writing;
