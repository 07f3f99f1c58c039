-- Each span segment's first start and last end (@files: a literal list): a scoped catch-up reads a trace's
-- spans only from the segments whose time range meets the trace's.
SELECT parse_filename(filename) AS segment, min(start_ns) AS lo_ns, max(end_ns) AS hi_ns, count(*) AS spans
FROM read_parquet(@files, filename = true, union_by_name = true)
GROUP BY ALL;
