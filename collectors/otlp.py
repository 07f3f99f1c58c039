"""What the two OTLP wire formats share: the decoded request, its rejections and the answers.

A trace request arrives as protobuf (``collectors.otlp_protobuf``) or OTLP/JSON (``collectors.otlp_json``);
each reader turns its format into the same ``Decoded``: the spans that can be stored, as parts of
``collectors.rows.SpanRows`` (the row builder the in-process exporter uses, so a span means the same thing
whichever way it came in; ``tests/test_receiver_mapping.py`` holds the paths to identical rows), and the count
of what it could not store (no run id, malformed ids) for ``partial_success``. The checks both readers apply
and the response bodies (``export_response``, ``error_status``) live here, apart from either reader, so the
receiver answers a request the same way whichever format it came in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NamedTuple

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from rollscope.collectors.rows import ResourceRow, SpanRows
from rollscope.settings import RUN_ID_PATTERN


class MalformedPayload(ValueError):
    """The body is not a valid OTLP trace request; the receiver answers 400 with this message."""


# --- what both formats mean by a span's kind, status and times ---------------------------------------------

SPAN_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS_CODES = {0: "unset", 1: "ok", 2: "error"}
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


# --- one request's spans ------------------------------------------------------------------------------------

_REASONS = {
    "no_run": "without rl.run.id (set it as a resource attribute, or start the receiver with --run-id)",
    "bad_run": "with an rl.run.id that is not 1-128 letters, digits, '.', '_' or '-'",
    "bad_id": "with a trace id that is not 16 bytes or a span id that is not 8 bytes (or all zero)",
    "bad_time": "with a start or end time beyond 2^63 ns",
}


class Part(NamedTuple):
    """Spans of one resource and scope, column-wise: the arguments of ``SpanRows.extend``."""

    resource: ResourceRow
    fixed: dict[str, list]
    attributes: list[dict]
    events: dict[int, list]


class Decoded:
    """One request: the spans that can be stored, as ``SpanRows.extend`` parts, and the count of the rest.

    Parts are added to ``SpanRows`` by whoever stores them (``add_to``): the receiver adds every request of
    a commit window to one ``SpanRows`` per run, so the Arrow conversion is paid once per segment.
    """

    def __init__(self, received: int):
        self.received = received
        self.parts: list[Part] = []
        self.rejected: dict[str, int] = {}
        self.rejected_by_run: dict[str, int] = {}

    @property
    def accepted(self) -> int:
        return sum(len(part.attributes) for part in self.parts)

    @property
    def rejected_spans(self) -> int:
        return sum(self.rejected.values())

    def reject(self, reason: str, n: int = 1, run_id: str | None = None) -> None:
        if n:
            self.rejected[reason] = self.rejected.get(reason, 0) + n
            if run_id is not None:
                self.rejected_by_run[run_id] = self.rejected_by_run.get(run_id, 0) + n

    def rejection_message(self) -> str:
        if not self.rejected:
            return ""
        parts = [f"{n} {_REASONS[reason]}" for reason, n in sorted(self.rejected.items())]
        return f"rejected {self.rejected_spans} spans: " + "; ".join(parts)

    def add_to(self, rows_of: Callable[[str], SpanRows]) -> None:
        """Extend the ``SpanRows`` of each part's run (``rows_of(run_id)``) with the part's spans."""
        for resource, fixed, attributes, events in self.parts:
            rows_of(resource.run_id).extend([resource] * len(attributes), fixed, attributes, events)

    def tables(self) -> list[tuple[str, pa.Table]]:
        """``(run_id, table)`` for this request alone."""
        rows: dict[str, SpanRows] = {}
        self.add_to(lambda run_id: rows.setdefault(run_id, SpanRows()))
        return [(run_id, table) for run_id, r in rows.items() for table in r.tables().values()]

    def by_run(self) -> dict[str, dict[str, int]]:
        """Per run: spans received, stored and rejected (collector_stats counters)."""
        out: dict[str, dict[str, int]] = {}
        for part in self.parts:
            counts = out.setdefault(part.resource.run_id, {"spans_received": 0, "spans_exported": 0})
            counts["spans_received"] += len(part.attributes)
            counts["spans_exported"] += len(part.attributes)
        for run_id, rejected in self.rejected_by_run.items():
            counts = out.setdefault(run_id, {"spans_received": 0, "spans_exported": 0})
            counts["spans_received"] += rejected
            counts["spans_failed"] = rejected
        return out


def resource_row(
    attributes: dict, default_run_id: str | None, decoded: Decoded, spans: int
) -> ResourceRow | None:
    """The resource's row, or None (its spans counted as rejected) when it names no usable run."""
    resource = ResourceRow.from_attributes(attributes, default_run_id)
    if resource.run_id is None:
        decoded.reject("no_run", spans)
    elif not RUN_ID_PATTERN.match(resource.run_id):
        decoded.reject("bad_run", spans)
    else:
        return resource
    return None


_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)


def valid_ids(trace_ids: list, span_ids: list, parents: list) -> bool:
    """All ids well formed, checked a column at a time (a span at a time only when one is not)."""
    return (
        set(map(len, trace_ids)) == {16}
        and set(map(len, span_ids)) == {8}
        and set(map(len, parents)) <= {0, 8}
        and _ZERO_TRACE not in trace_ids
        and _ZERO_SPAN not in span_ids
    )


def id_ok(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    return (
        len(trace_id) == 16
        and len(span_id) == 8
        and len(parent) in (0, 8)
        and trace_id != _ZERO_TRACE
        and span_id != _ZERO_SPAN
    )


# --- answers ----------------------------------------------------------------------------------------------


def export_response(decoded: Decoded, as_json: bool) -> bytes:
    """ExportTraceServiceResponse, with partial_success set only when spans were rejected."""
    if as_json:
        if not decoded.rejected:
            return b"{}"
        partial = {"rejectedSpans": str(decoded.rejected_spans), "errorMessage": decoded.rejection_message()}
        return json.dumps({"partialSuccess": partial}).encode()
    response = trace_service_pb2.ExportTraceServiceResponse()
    if decoded.rejected:
        response.partial_success.rejected_spans = decoded.rejected_spans
        response.partial_success.error_message = decoded.rejection_message()
    return response.SerializeToString()


_TAG_STATUS_CODE = b"\x08"  # google.rpc.Status.code = 1, varint
_TAG_STATUS_MESSAGE = b"\x12"  # google.rpc.Status.message = 2, length-prefixed


def error_status(code: int, message: str, as_json: bool) -> bytes:
    """A ``google.rpc.Status`` body (code, message), as OTLP/HTTP asks of a failed request.

    Encoded by hand (two fields) because ``googleapis-common-protos`` is not a dependency of the receiver.
    """
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode()
    return _TAG_STATUS_CODE + _varint(code) + _TAG_STATUS_MESSAGE + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
