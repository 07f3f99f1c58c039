-- A view over a query our code composed (a table without parts: no rows, typed as its schema says;
-- pieces._point).
CREATE OR REPLACE VIEW @name AS @query;
