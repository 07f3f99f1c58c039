-- A fragment (not run by itself): the rows of two queries, columns matched by name (a table's new rows and
-- the previous rows a catch-up keeps).
@first UNION ALL BY NAME @second
