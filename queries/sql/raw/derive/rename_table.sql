-- A catch-up's scoped rows of a derived table kept under another name (_<t>_scoped), so that _<t>_mat can
-- become the view over the table's final parts (refresh.read_final).
ALTER TABLE @table RENAME TO @name;
