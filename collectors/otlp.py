"""OTLP trace requests, protobuf or OTLP/JSON, into store rows: the receiver's half of the one span mapping.

Spans go through ``collectors.rows`` (``ResourceRow`` and ``SpanRows``), the row builder the in-process
exporter uses, so a span means the same thing whichever way it came in; ``tests/test_receiver_mapping.py``
holds the two paths to identical rows. This module only turns the wire formats into what ``SpanRows`` takes,
checks what it cannot store (no run id, malformed ids) and counts it for ``partial_success``.

The protobuf path is the receiver's hot loop. Reading an attribute through the generated protobuf objects
costs about a microsecond, so requests are parsed with a copy of the opentelemetry-proto schema whose span
and resource ``attributes`` are declared ``bytes`` (the wire format is the same): each attribute arrives as
its encoded ``KeyValue`` and its decoded ``(key, value)`` is cached by those bytes, since most attributes
repeat across spans. An attribute not in the cache is parsed directly when it has the plain layout SDKs write
for a string, int, double or bool, and by the official ``KeyValue`` class otherwise, which is what rejects a
malformed one.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Callable
from typing import NamedTuple

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from rollscope.collectors.rows import ResourceRow, SpanRows
from rollscope.store.layout import RUN_ID_PATTERN
from rollscope.store.schema import SPAN_FIELDS


class MalformedPayload(ValueError):
    """The body is not a valid OTLP trace request; the receiver answers 400 with this message."""


# --- the request schema, with attributes left encoded ------------------------------------------------------


def _schema_pool() -> descriptor_pool.DescriptorPool:
    """opentelemetry-proto's own descriptors, except that span and resource attributes and the span's status
    are ``bytes`` (decoded through caches: most repeat)."""
    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, trace_pb2, trace_service_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        for message in proto.message_type:
            if message.name in ("Span", "Resource"):
                for f in message.field:
                    if f.name == "attributes" or (message.name == "Span" and f.name == "status"):
                        f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                        f.ClearField("type_name")
        pool.Add(proto)
    return pool


_REQUEST = message_factory.GetMessageClass(
    _schema_pool().FindMessageTypeByName(trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR.full_name)
)
_KeyValue = common_pb2.KeyValue
_SPAN_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS_CODES = {0: "unset", 1: "ok", 2: "error"}
_INT64_MAX = 2**63 - 1


# --- AnyValue into Python values (the SDK's types; arrays and kvlists become lists and dicts) -------------


def any_value(value: common_pb2.AnyValue) -> object:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def _key_value(encoded: bytes) -> tuple[str, object]:
    """One encoded KeyValue, parsed (and validated) by the official class."""
    try:
        kv = _KeyValue.FromString(encoded)
    except DecodeError as e:
        raise MalformedPayload(f"an attribute is not a valid KeyValue: {e}") from None
    return kv.key, any_value(kv.value)


_DOUBLE = struct.Struct("<d").unpack_from

# Protobuf tag bytes, (field number << 3) | wire type, of the fields the flat KeyValue reader below knows:
# wire type 0 is a varint, 1 eight bytes, 2 a length-prefixed run of bytes.
_TAG_KEY = 0x0A  # KeyValue.key = 1, length-prefixed
_TAG_VALUE = 0x12  # KeyValue.value = 2 (an AnyValue), length-prefixed
_TAG_STRING = 0x0A  # AnyValue.string_value = 1, length-prefixed
_TAG_BOOL = 0x10  # AnyValue.bool_value = 2, varint
_TAG_INT = 0x18  # AnyValue.int_value = 3, varint
_TAG_DOUBLE = 0x21  # AnyValue.double_value = 4, eight bytes
_ONE_BYTE_LENGTH = 0x80  # a length below this is one varint byte


_PREFIXES: dict[bytes, tuple | bool] = {}


def _plain_key_value(b: bytes) -> tuple[str, object] | None:
    """A KeyValue laid out exactly as SDKs write a short string, int, double or bool, else None.

    The attributes that miss the cache (timings, token counts, request ids) take this path, so it is written
    out flat: about twice as fast as the generated class. Everything before the value itself (the key, the
    lengths and the value's tag) is checked and decoded once per distinct prefix (``_prefix``), so a miss
    only reads its value. Anything unusual (long keys or values, nested values, invalid UTF-8, trailing
    fields) returns None and is left to the generated class.
    """
    size = len(b)
    if size < 5:
        return None
    raw = b[: b[1] + 5]  # key tag, key length, key, value tag, value length, AnyValue tag
    prefix = _PREFIXES.get(raw)
    if prefix is None:
        prefix = _prefix(raw)
    if not prefix:
        return None
    key, tag, q, end = prefix
    if end != size:
        return None
    if tag == _TAG_DOUBLE:
        return (key, _DOUBLE(b, q)[0]) if size == q + 8 else None
    if tag == _TAG_INT:
        value = _plain_varint(b, q, size)
        return None if value is None else (key, value)
    if tag == _TAG_STRING:
        if q < size and b[q] == size - q - 1 and b[q] < _ONE_BYTE_LENGTH:
            try:
                return key, b[q + 1 :].decode()
            except UnicodeDecodeError:
                return None
        return None
    return (key, b[q] == 1) if size == q + 1 and b[q] < 2 else None  # _TAG_BOOL


def _prefix(raw: bytes) -> tuple[str, int, int, int] | bool:
    """A KeyValue's bytes up to its value: ``(key, value tag, where the value starts, where the KeyValue
    ends)`` when it has the plain layout, else False. Remembered in ``_PREFIXES``."""
    p = raw[1] + 2  # end of the key; a one-byte length, so under 128 bytes
    decoded: tuple | bool = False
    if (
        raw[0] == _TAG_KEY
        and p <= _ONE_BYTE_LENGTH + 1
        and len(raw) == p + 3
        and raw[p] == _TAG_VALUE
        and raw[p + 1] < _ONE_BYTE_LENGTH
        and raw[p + 2] in (_TAG_DOUBLE, _TAG_INT, _TAG_STRING, _TAG_BOOL)
    ):
        try:
            decoded = (raw[2:p].decode(), raw[p + 2], p + 3, p + 2 + raw[p + 1])
        except UnicodeDecodeError:
            pass
    if len(_PREFIXES) >= 4096:  # a sender inventing keys must not grow this without bound
        _PREFIXES.clear()
    _PREFIXES[raw] = decoded
    return decoded


def _plain_varint(b: bytes, q: int, size: int) -> int | None:
    """A varint that ends the buffer, as an int64 (two's complement); short ones without a loop."""
    n = size - q
    if n == 1 and b[q] < 0x80:
        return b[q]
    if n == 2 and b[q] > 0x7F and b[q + 1] < 0x80:
        return (b[q] & 0x7F) | (b[q + 1] << 7)
    value = shift = 0
    for i in range(q, size):
        byte = b[i]
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if i != size - 1 or shift > 70:
                return None
            value &= 0xFFFF_FFFF_FFFF_FFFF  # protobuf keeps the low 64 bits
            return value - (1 << 64) if value >= 1 << 63 else value
    return None


# --- decoded attributes, cached by their encoding: most repeat across spans -------------------------------

_CACHE_LIMIT = 65_536  # about 15 MiB of decoded attributes


class _KeyValueCache(dict):
    """Encoded KeyValue -> decoded ``(key, value)``. Looked up with ``map(cache.__getitem__, ...)`` so a hit
    runs no Python code at all; a miss is decoded here and remembered (the cache restarts when full)."""

    def __missing__(self, encoded: bytes) -> tuple[str, object]:
        pair = _plain_key_value(encoded) or _key_value(encoded)
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        self[encoded] = pair
        return pair


_KEY_VALUES = _KeyValueCache()


class _StatusCache(dict):
    """Encoded Status -> ``(status_code name, message or None)``; nearly every span's is empty or repeats."""

    def __missing__(self, encoded: bytes) -> tuple[str, str | None]:
        try:
            status = trace_pb2.Status.FromString(encoded)
        except DecodeError as e:
            raise MalformedPayload(f"a span status is not a valid Status: {e}") from None
        decoded = (_STATUS_CODES.get(status.code, "unset"), status.message or None)
        if len(self) >= 4096:
            self.clear()
        self[encoded] = decoded
        return decoded


_STATUSES = _StatusCache()


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


def _resource(
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


def _valid_ids(trace_ids: list, span_ids: list, parents: list) -> bool:
    """All ids well formed, checked a column at a time (a span at a time only when one is not)."""
    return (
        set(map(len, trace_ids)) == {16}
        and set(map(len, span_ids)) == {8}
        and set(map(len, parents)) <= {0, 8}
        and _ZERO_TRACE not in trace_ids
        and _ZERO_SPAN not in span_ids
    )


def _id_ok(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    return (
        len(trace_id) == 16
        and len(span_id) == 8
        and len(parent) in (0, 8)
        and trace_id != _ZERO_TRACE
        and span_id != _ZERO_SPAN
    )


# --- protobuf -------------------------------------------------------------------------------------------------


def decode_protobuf(body: bytes, default_run_id: str | None = None) -> Decoded:
    """An ``application/x-protobuf`` ExportTraceServiceRequest into rows; MalformedPayload if invalid."""
    try:
        request = _REQUEST.FromString(body)
    except DecodeError as e:
        raise MalformedPayload(f"body is not a protobuf ExportTraceServiceRequest: {e}") from None
    decoded = Decoded(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))
    for resource_spans in request.resource_spans:
        attributes = dict(map(_KEY_VALUES.__getitem__, resource_spans.resource.attributes))
        count = sum(len(ss.spans) for ss in resource_spans.scope_spans)
        resource = _resource(attributes, default_run_id, decoded, count)
        if resource is None:
            for scope_spans in resource_spans.scope_spans:
                _read_attributes(scope_spans.spans)
            continue
        for scope_spans in resource_spans.scope_spans:
            _protobuf_spans(decoded, resource, scope_spans.spans, scope_spans.scope.name or None)
    return decoded


def _protobuf_spans(decoded: Decoded, resource: ResourceRow, spans, scope_name: str | None) -> None:
    """The hot loop, one comprehension per field: a scope's spans into a ``Part``."""
    spans = list(spans)  # one Python wrapper per span, not one per field read
    trace_ids = [s.trace_id for s in spans]
    span_ids = [s.span_id for s in spans]
    parents = [s.parent_span_id for s in spans]
    starts = [s.start_time_unix_nano for s in spans]
    ends = [s.end_time_unix_nano for s in spans]
    if not (
        _valid_ids(trace_ids, span_ids, parents)
        and max(starts, default=0) <= _INT64_MAX
        and max(ends, default=0) <= _INT64_MAX
    ):
        return _protobuf_spans(decoded, resource, _keep_valid(decoded, resource, spans), scope_name)
    from_bytes = int.from_bytes
    kinds = _SPAN_KINDS
    statuses = list(map(_STATUSES.__getitem__, [s.status for s in spans]))
    fixed = {
        "trace_id": trace_ids,
        "span_id": [from_bytes(b, "big") for b in span_ids],
        "parent_span_id": [from_bytes(b, "big") if b else None for b in parents],
        "name": [s.name for s in spans],
        "span_kind": [kinds.get(s.kind, "unspecified") for s in spans],
        "start_ns": starts,
        "end_ns": ends,
        "status_code": [st[0] for st in statuses],
        "status_message": [st[1] for st in statuses],
        "scope_name": [scope_name] * len(spans),
    }
    decoded_pair = _KEY_VALUES.__getitem__
    attributes = [dict(map(decoded_pair, s.attributes)) for s in spans]
    events = {i: [_protobuf_event(e) for e in s.events] for i, s in enumerate(spans) if s.events}
    if spans:
        decoded.parts.append(Part(resource, fixed, attributes, events))


def _read_attributes(spans) -> None:
    """Decode attributes (and status) of spans that will not be stored: a malformed one must still fail the
    request."""
    for span in spans:
        _STATUSES[span.status]
        for _ in map(_KEY_VALUES.__getitem__, span.attributes):
            pass


def _keep_valid(decoded: Decoded, resource: ResourceRow, spans) -> list:
    kept = []
    for s in spans:
        if not _id_ok(s.trace_id, s.span_id, s.parent_span_id):
            decoded.reject("bad_id", run_id=resource.run_id)
        elif s.start_time_unix_nano > _INT64_MAX or s.end_time_unix_nano > _INT64_MAX:
            decoded.reject("bad_time", run_id=resource.run_id)
        else:
            kept.append(s)
            continue
        _read_attributes([s])
    return kept


def _protobuf_event(event: trace_pb2.Span.Event) -> dict:
    attributes = {kv.key: any_value(kv.value) for kv in event.attributes}
    return {"name": event.name, "time_ns": event.time_unix_nano, "attributes": attributes}


# --- OTLP/JSON ------------------------------------------------------------------------------------------------
#
# Why a hand-written reader: protobuf's own ``json_format.ParseDict`` (after turning the hex ids into the
# base64 it expects) followed by the protobuf path above costs about 12x this reader per span
# (``python -m benchmarks.ingest`` measures both on the same bodies: ~137 vs ~12 us/span), because it builds
# and validates every message field by field in Python. OTLP/JSON is what curl, browsers and some Collector
# setups send, so it stays a supported path at a useful rate. ``_plain_json_span`` reads spans as SDKs write
# them without per-field validators; anything else takes ``_json_span``, which checks each field and names
# where a request is malformed.


def decode_json(body: bytes, default_run_id: str | None = None) -> Decoded:
    """An ``application/json`` OTLP/JSON request (hex ids, lowerCamelCase names) into rows.

    The whole request is checked before any span is kept, so a malformed one stores nothing (400).
    """
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise MalformedPayload(f"body is not JSON: {e}") from None
    resources = []
    for i, rs in enumerate(_list(_object(request, "request"), "resourceSpans", "request")):
        where = f"resourceSpans[{i}]"
        rs = _object(rs, where)
        attributes = _json_attributes(
            _object(rs.get("resource", {}), f"{where}.resource"), f"{where}.resource"
        )
        resources.append((attributes, _json_scopes(rs, where)))
    decoded = Decoded(sum(len(spans) for _, spans in resources))
    for attributes, spans in resources:
        resource = _resource(attributes, default_run_id, decoded, len(spans))
        if resource is not None:
            _json_add(decoded, resource, spans)
    return decoded


def _json_scopes(rs: dict, where: str) -> list[dict]:
    spans = []
    for j, ss in enumerate(_list(rs, "scopeSpans", where)):
        here = f"{where}.scopeSpans[{j}]"
        ss = _object(ss, here)
        scope_name = _string(_object(ss.get("scope", {}), f"{here}.scope"), "name", f"{here}.scope") or None
        spans += [
            _plain_json_span(span, scope_name) or _json_span(span, scope_name, f"{here}.spans[{k}]")
            for k, span in enumerate(_list(ss, "spans", here))
        ]
    return spans


def _plain_json_span(span: object, scope_name: str | None) -> dict | None:
    """A span as SDKs write it (no events, plain attributes, integer enums), read without the validators
    and their messages; the same dict as ``_json_span``, or None to take that full path."""
    if type(span) is not dict:
        return None
    get = span.get
    ids, name = (get("traceId", ""), get("spanId", ""), get("parentSpanId", "")), get("name", "")
    status, attributes = get("status", {}), get("attributes", [])
    if (
        get("events")
        or type(name) is not str
        or type(status) is not dict
        or type(attributes) is not list
        or not all(type(i) is str for i in ids)
    ):
        return None
    kind, code, message = get("kind", 0), status.get("code", 0), status.get("message", "")
    start, end = _plain_json_uint(get("startTimeUnixNano", 0)), _plain_json_uint(get("endTimeUnixNano", 0))
    if (
        type(kind) is not int
        or kind not in _SPAN_KINDS
        or type(code) is not int
        or code not in _STATUS_CODES
        or type(message) is not str
        or start is None
        or end is None
    ):
        return None
    out = {}
    for kv in attributes:
        pair = _plain_json_attribute(kv)
        if pair is None:
            return None
        out[pair[0]] = pair[1]
    try:
        trace_id, span_id, parent = map(bytes.fromhex, ids)
    except ValueError:
        return None
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "span_kind": _SPAN_KINDS[kind],
        "start_ns": start,
        "end_ns": end,
        "status_code": _STATUS_CODES[code],
        "status_message": message or None,
        "scope_name": scope_name,
        "attributes": out,
        "events": [],
    }


def _plain_json_uint(v: object) -> int | None:
    """A timestamp as SDKs write it: a decimal string (or a JSON integer) within uint64, else None."""
    if type(v) is str and v.isascii() and v.isdigit():
        v = int(v)
    return v if type(v) is int and 0 <= v <= 2**64 - 1 else None


_FIXED = [f.name for f in SPAN_FIELDS]


def _json_add(decoded: Decoded, resource: ResourceRow, spans: list[dict]) -> None:
    kept = []
    for span in spans:
        if not _id_ok(span["trace_id"], span["span_id"], span["parent_span_id"]):
            decoded.reject("bad_id", run_id=resource.run_id)
        elif not (0 <= span["start_ns"] <= _INT64_MAX and 0 <= span["end_ns"] <= _INT64_MAX):
            decoded.reject("bad_time", run_id=resource.run_id)
        else:
            kept.append(span)
    if not kept:
        return
    fixed = {name: [span[name] for span in kept] for name in _FIXED}
    fixed["span_id"] = [int.from_bytes(b, "big") for b in fixed["span_id"]]
    fixed["parent_span_id"] = [int.from_bytes(b, "big") if b else None for b in fixed["parent_span_id"]]
    events = {i: span["events"] for i, span in enumerate(kept) if span["events"]}
    decoded.parts.append(Part(resource, fixed, [span["attributes"] for span in kept], events))


def _json_span(span: object, scope_name: str | None, where: str) -> dict:
    """One OTLP/JSON span: the fixed fields by column name (ids still bytes), attributes and events."""
    span = _object(span, where)
    status = _object(span.get("status", {}), f"{where}.status")
    return {
        "trace_id": _hex_id(span, "traceId", where),
        "span_id": _hex_id(span, "spanId", where),
        "parent_span_id": _hex_id(span, "parentSpanId", where),
        "name": _string(span, "name", where),
        "span_kind": _enum(span, "kind", where, _SPAN_KINDS, "SPAN_KIND_"),
        "start_ns": _integer(span, "startTimeUnixNano", where),
        "end_ns": _integer(span, "endTimeUnixNano", where),
        "status_code": _enum(status, "code", f"{where}.status", _STATUS_CODES, "STATUS_CODE_"),
        "status_message": _string(status, "message", f"{where}.status") or None,
        "scope_name": scope_name,
        "attributes": _json_attributes(span, where),
        "events": [
            _json_event(e, f"{where}.events[{i}]") for i, e in enumerate(_list(span, "events", where))
        ],
    }


def _json_event(event: object, where: str) -> dict:
    event = _object(event, where)
    return {
        "name": _string(event, "name", where),
        "time_ns": _integer(event, "timeUnixNano", where),
        "attributes": _json_attributes(event, where),
    }


def _json_attributes(holder: dict, where: str) -> dict:
    out = {}
    for i, kv in enumerate(_list(holder, "attributes", where)):
        pair = _plain_json_attribute(kv)
        if pair is not None:
            out[pair[0]] = pair[1]
            continue
        kv = _object(kv, f"{where}.attributes[{i}]")
        key = _string(kv, "key", f"{where}.attributes[{i}]")
        out[key] = json_any_value(kv.get("value", {}), f"{where}.attributes[{i}].value")
    return out


def _plain_json_attribute(kv: object) -> tuple[str, object] | None:
    """``{"key": k, "value": {"<kind>Value": v}}`` as SDKs write a string, int, double or bool, read without
    the validators (which give the same answer); anything else returns None for the full path (and its
    error message)."""
    if type(kv) is not dict or len(kv) != 2:
        return None
    key, value = kv.get("key"), kv.get("value")
    if type(key) is not str or type(value) is not dict or len(value) != 1:
        return None
    ((kind, v),) = value.items()
    t = type(v)
    if kind == "stringValue" and t is str:
        return key, v
    if kind == "intValue" and (t is int or (t is str and v.isascii() and v.removeprefix("-").isdigit())):
        number = int(v)
        return (key, number) if -(2**63) <= number <= 2**64 - 1 else None
    if kind == "doubleValue" and t is float:
        return key, v
    if kind == "boolValue" and t is bool:
        return key, v
    return None


def json_any_value(value: object, where: str) -> object:
    """An OTLP/JSON AnyValue: int64 may be a decimal string, bytes are base64, arrays and kvlists nest.

    Unknown field names are ignored, as the specification asks; two values in one AnyValue are an error.
    """
    known = [(kind, v) for kind, v in _object(value, where).items() if kind in _ANY_VALUE_READERS]
    if not known:
        return None
    if len(known) > 1:
        raise MalformedPayload(f"{where}: an AnyValue holds one value, not {[kind for kind, _ in known]}")
    kind, v = known[0]
    return _ANY_VALUE_READERS[kind](v, f"{where}.{kind}")


def _json_string(v: object, where: str) -> str:
    if not isinstance(v, str):
        raise MalformedPayload(f"{where}: expected a string")
    return v


def _json_bool(v: object, where: str) -> bool:
    if not isinstance(v, bool):
        raise MalformedPayload(f"{where}: expected true or false")
    return v


def _json_int(v: object, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | str | float):
        raise MalformedPayload(f"{where}: expected an integer or a decimal string")
    try:
        number = int(v) if not isinstance(v, float) else (int(v) if v.is_integer() else None)
    except ValueError:
        number = None
    if number is None or not -(2**63) <= number <= 2**64 - 1:
        raise MalformedPayload(f"{where}: {v!r} is not a 64-bit integer")
    return number


def _json_double(v: object, where: str) -> float:
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise MalformedPayload(f"{where}: expected a number")
    return float(v)


def _json_bytes(v: object, where: str) -> bytes:
    text = _json_string(v, where)
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except binascii.Error:
        raise MalformedPayload(f"{where}: not base64") from None


def _json_array(v: object, where: str) -> list:
    values = _list(_object(v, where), "values", where)
    return [json_any_value(x, f"{where}.values[{i}]") for i, x in enumerate(values)]


def _json_kvlist(v: object, where: str) -> dict:
    return _json_attributes({"attributes": _list(_object(v, where), "values", where)}, where)


_ANY_VALUE_READERS = {
    "stringValue": _json_string,
    "boolValue": _json_bool,
    "intValue": _json_int,
    "doubleValue": _json_double,
    "bytesValue": _json_bytes,
    "arrayValue": _json_array,
    "kvlistValue": _json_kvlist,
}


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise MalformedPayload(f"{where or 'request'}: expected a JSON object")
    return value


def _list(holder: dict, key: str, where: str) -> list:
    value = holder.get(key, [])
    if not isinstance(value, list):
        raise MalformedPayload(f"{where}.{key}: expected a JSON array")
    return value


def _string(holder: dict, key: str, where: str) -> str:
    value = holder.get(key, "")
    if not isinstance(value, str):
        raise MalformedPayload(f"{where}.{key}: expected a string")
    return value


def _integer(holder: dict, key: str, where: str) -> int:
    return _json_int(holder.get(key, 0), f"{where}.{key}")


def _enum(holder: dict, key: str, where: str, names: dict[int, str], prefix: str) -> str:
    value = holder.get(key, 0)
    if isinstance(value, str):
        name = value.removeprefix(prefix).lower()
        if name not in names.values():
            raise MalformedPayload(f"{where}.{key}: unknown value {value!r}")
        return name
    return names.get(_json_int(value, f"{where}.{key}"), names[0])


def _hex_id(holder: dict, key: str, where: str) -> bytes:
    value = _string(holder, key, where)
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise MalformedPayload(f"{where}.{key}: {value[:40]!r} is not hex") from None


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
