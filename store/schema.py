"""The row schemas of the store's datasets, derived from the conventions so a column is defined once.

``spans`` holds one row per span, whichever way it arrived (in-process exporter or OTLP receiver);
``collector_stats`` holds cumulative counters snapshotted by each exporting process. ``run_id`` is not a
column of the files: it is the Hive partition (``run_id=<id>/``) so one run can be read or deleted alone.
"""

from __future__ import annotations

import pyarrow as pa

from rollscope.collectors import semconv

_ARROW = {"str": pa.string(), "int": pa.int64(), "float": pa.float64()}

# Fields every span has, before the convention columns.
SPAN_FIELDS = [
    pa.field("trace_id", pa.binary(16)),
    pa.field("span_id", pa.uint64()),
    pa.field("parent_span_id", pa.uint64()),
    pa.field("name", pa.string()),
    pa.field("span_kind", pa.string()),
    pa.field("start_ns", pa.int64()),
    pa.field("end_ns", pa.int64()),
    pa.field("status_code", pa.string()),
    pa.field("status_message", pa.string()),
    pa.field("scope_name", pa.string()),
]
# Attributes not in the conventions are kept here as JSON objects, never dropped.
EXTRA_FIELDS = [
    pa.field("attributes", pa.string()),
    pa.field("resource_attributes", pa.string()),
    pa.field("events", pa.string()),
]


def _convention_fields() -> list[pa.Field]:
    return [pa.field(a.column, _ARROW[a.type]) for a in semconv.ALL_ATTRIBUTES if a.column != "run_id"]


SPAN_SCHEMA = pa.schema(SPAN_FIELDS + _convention_fields() + EXTRA_FIELDS)

COLLECTOR_STATS_SCHEMA = pa.schema(
    [
        pa.field("time_ns", pa.int64()),
        pa.field("service_name", pa.string()),
        pa.field("instance_id", pa.string()),
        pa.field("role", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("source", pa.string()),  # "exporter" or "receiver"
        pa.field("spans_received", pa.int64()),
        pa.field("spans_exported", pa.int64()),
        pa.field("spans_dropped", pa.int64()),
        pa.field("spans_failed", pa.int64()),
        pa.field("attributes_kept_untyped", pa.int64()),
        pa.field("segments_published", pa.int64()),
    ]
)

DATASETS = {"spans": SPAN_SCHEMA, "collector_stats": COLLECTOR_STATS_SCHEMA}
