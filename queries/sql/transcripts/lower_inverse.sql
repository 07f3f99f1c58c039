-- Every character whose lower() is one ASCII character, by that character: what a text search's prefilter
-- (queries/text_index.py `prefilter`) matches each character of a lowercased ASCII pattern with, so that a text
-- it passes over cannot contain the pattern once lowercased. Also every character whose lower() is longer than
-- one character and holds an ASCII one (`many`: none in DuckDB's simple mapping; the prefilter is off if any).
SELECT
    lower(chr(i::INTEGER)) AS lowered,
    list(i::INTEGER ORDER BY i) AS code_points,
    length(lower(chr(i::INTEGER))) > 1 AS many
FROM range(1, 1114112) AS r(i)
WHERE i NOT BETWEEN 55296 AND 57343  -- surrogates are no characters
  AND regexp_matches(lower(chr(i::INTEGER)), '[\x01-\x7f]')
GROUP BY ALL
