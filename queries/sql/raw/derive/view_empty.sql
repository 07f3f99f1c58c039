-- A view of no rows with the columns of @schema: a table with no parts yet (derive_db.view).
CREATE OR REPLACE VIEW @name AS SELECT * FROM @schema LIMIT 0;
