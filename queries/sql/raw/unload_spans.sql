DELETE FROM _spans WHERE _segment IN (SELECT unnest($segments));
