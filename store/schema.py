"""The row schemas of the store's datasets, derived from the conventions so a column is defined once.

``spans`` holds one row per span, whichever way it arrived (in-process exporter or OTLP receiver);
``collector_stats`` holds cumulative counters snapshotted by each exporting process; ``messages`` holds what
the agent said and did, one row per message, kept apart from the spans so that a scan of spans never reads
text and a store without content costs what it did before. ``run_id`` is not a
column of the files: it is the Hive partition (``run_id=<id>/``) so one run can be read or deleted alone.

The columns are declared here as ``(name, type)`` pairs (``columns``); the Arrow schemas the writers use
(``SPAN_SCHEMA``, ``COLLECTOR_STATS_SCHEMA``, ``MESSAGES_SCHEMA``, ``DATASETS``, ``SPAN_FIELDS``, ``EXTRA_FIELDS``) are built from
them on first use, so that a reader, which never writes Arrow, never imports pyarrow (0.1 s of every
`rollscope advise`).
"""

from __future__ import annotations

from functools import cache

from rollscope import semconv

DATASET_NAMES = ("spans", "collector_stats", "messages")

# Fields every span has, before the convention columns.
_SPAN_FIELDS = (
    ("trace_id", "binary16"),
    ("span_id", "uint64"),
    ("parent_span_id", "uint64"),
    ("name", "str"),
    ("span_kind", "str"),
    ("start_ns", "int"),
    ("end_ns", "int"),
    ("status_code", "str"),
    ("status_message", "str"),
    ("scope_name", "str"),
)
# Attributes not in the conventions are kept here as JSON objects, never dropped.
_EXTRA_FIELDS = (("attributes", "str"), ("resource_attributes", "str"), ("events", "str"))

_COLLECTOR_STATS_FIELDS = (
    ("time_ns", "int"),
    ("service_name", "str"),
    ("instance_id", "str"),
    ("role", "str"),
    ("pid", "int"),
    ("source", "str"),  # "exporter" or "receiver"
    ("spans_received", "int"),
    ("spans_exported", "int"),
    ("spans_dropped", "int"),
    ("spans_failed", "int"),
    ("attributes_kept_untyped", "int"),
    ("segments_published", "int"),
    ("messages_exported", "int"),  # transcripts: message rows written to the messages dataset
    ("messages_sampled_out", "int"),  # ... and left out by the capture policy's group sample
)

# One row per message (docs/store.md "Transcripts"): the span it came from, where in the rollout it belongs, the
# text. ``ordinal`` orders a span's messages (system, input, tool arguments, output, tool result, in the order
# each list gave them); ``message_index`` is the message's position in the list its span sent, so a span that
# re-sent its history and was stored from its first new message starts past 0.
_MESSAGE_FIELDS = (
    ("trace_id", "binary16"),
    ("span_id", "uint64"),
    ("start_ns", "int"),
    ("rollout_id", "str"),
    ("turn_index", "int"),
    ("span_name", "str"),
    ("ordinal", "int"),
    ("source", "str"),  # system | input | output | tool_arguments | tool_result
    ("message_index", "int"),
    ("role", "str"),  # system | user | assistant | tool
    ("content", "str"),
    ("reasoning", "str"),
    ("tool_calls", "str"),  # JSON list of {id, name, arguments}
    ("tool_name", "str"),
    ("tool_call_id", "str"),
    ("finish_reason", "str"),
    ("tokens", "int"),
    ("content_chars", "int"),  # the text's length before the cap (content, reasoning and tool calls)
    ("truncated", "bool"),
)

# Each declared type as DuckDB reads it from the Parquet files the writers write.
DUCKDB_TYPES = {
    "binary16": "BLOB",
    "uint64": "UBIGINT",
    "str": "VARCHAR",
    "int": "BIGINT",
    "float": "DOUBLE",
    "bool": "BOOLEAN",
}


def _convention_fields() -> tuple[tuple[str, str], ...]:
    return tuple((a.column, a.type) for a in semconv.ALL_ATTRIBUTES if a.column != "run_id")


@cache
def columns(dataset: str) -> tuple[tuple[str, str], ...]:
    """The dataset's columns in file order, each as ``(name, type)``; types are keys of ``DUCKDB_TYPES``."""
    if dataset == "spans":
        return _SPAN_FIELDS + _convention_fields() + _EXTRA_FIELDS
    if dataset == "collector_stats":
        return _COLLECTOR_STATS_FIELDS
    if dataset == "messages":
        return _MESSAGE_FIELDS
    raise ValueError(f"unknown dataset {dataset!r}")


@cache
def _arrow() -> dict:
    import pyarrow as pa

    types = {
        "binary16": pa.binary(16),
        "uint64": pa.uint64(),
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
    }

    def fields(declared) -> list:
        return [pa.field(name, types[kind]) for name, kind in declared]

    span_schema = pa.schema(fields(columns("spans")))
    stats_schema = pa.schema(fields(columns("collector_stats")))
    messages_schema = pa.schema(fields(columns("messages")))
    return {
        "SPAN_FIELDS": fields(_SPAN_FIELDS),
        "EXTRA_FIELDS": fields(_EXTRA_FIELDS),
        "SPAN_SCHEMA": span_schema,
        "COLLECTOR_STATS_SCHEMA": stats_schema,
        "MESSAGES_SCHEMA": messages_schema,
        "DATASETS": {"spans": span_schema, "collector_stats": stats_schema, "messages": messages_schema},
    }


_ARROW_NAMES = (
    "SPAN_FIELDS",
    "EXTRA_FIELDS",
    "SPAN_SCHEMA",
    "COLLECTOR_STATS_SCHEMA",
    "MESSAGES_SCHEMA",
    "DATASETS",
)


def __getattr__(name: str):
    # The Arrow schemas, built (and pyarrow imported) when a writer first asks for one.
    if name not in _ARROW_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _arrow()[name]
