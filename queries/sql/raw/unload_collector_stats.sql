DELETE FROM _collector_stats WHERE _segment IN (SELECT unnest($segments));
