-- A derived table's rows of the previous pass removed before the scope is derived again (catch_up).
DELETE FROM @table;
