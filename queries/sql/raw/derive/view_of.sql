-- A view over a query our code composed (a table without parts: no rows, typed as its schema says;
-- pieces._point, reader._empty_view).
CREATE OR REPLACE VIEW @name AS @query;
