-- Rows held by the given loaded segments (reader.py tells a compaction from lost data by it).
SELECT count(*) FROM _spans WHERE _segment IN (SELECT unnest($segments))
