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

Most values do not repeat, though (timings, token counts, ids), so a scope with many spans is read in bulk
(``span_attributes``): the request is parsed a second time with a schema that merges the scope's spans into
one message, so its keys and its string, int, double and bool values arrive as one list each from protobuf's
C parser, and numpy, reading the encoded attributes, says which list each value comes from and checks that each
attribute is laid out plainly; a scope where one is not takes the per-attribute path. OTLP/JSON scopes are read
a column at a time in the same spirit (``_plain_json_columns``). ``tests/test_receiver_attributes.py`` holds
the bulk readers to what the official classes read.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections import deque
from collections.abc import Callable
from functools import partial
from itertools import chain, compress, islice, repeat
from operator import attrgetter, eq, is_, itemgetter, methodcaller
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from rollscope.collectors.rows import ResourceRow, SpanRows
from rollscope.settings import RUN_ID_PATTERN
from rollscope.store.schema import SPAN_FIELDS

try:  # `pip install 'rollscope[fast]'`: OTLP/JSON bodies parse in about half the time (see parse_json)
    from orjson import loads as _fast_loads
except ImportError:  # the default install: the standard library alone
    _fast_loads = None


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
_UINT64_MAX = 2**64 - 1


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


# --- a scope's attributes at once: protobuf reads the values, numpy checks the layout ---------------------
#
# Most attribute values never repeat (timings, token counts, request ids), so most lookups in the cache above
# miss, and a miss costs a microsecond of Python. A request with many attributes is therefore parsed a second
# time, with a schema in which every span of a scope is one message and every attribute one ``KeyValue``
# (protobuf merges repeated occurrences of a singular message field), so that one scope's keys, strings, ints,
# doubles and bools arrive as five lists, each in order, read by protobuf's C parser. Which list each attribute
# takes its value from is read off the encoded attributes by numpy, which also checks that each holds exactly
# one key and one value laid out as SDKs write them; a scope with any other attribute (an array, a long key,
# two values) takes the per-attribute path, which is what rejects a malformed one.

_BULK_MIN = 64  # fewer attributes than this: numpy's per-call cost is more than it saves
_MERGED_MIN_SPANS = 8  # fewer spans than this: a second parse costs more than it saves
_PAD = bytes(
    512
)  # zero bytes after the last KeyValue: reading at a start plus two length bytes stays in bounds


def _merged_schema() -> descriptor_pool.DescriptorPool:
    """Request -> ResourceSpans -> ScopeSpans as in OTLP; below that, a scope's spans merge into one Span
    whose ``attributes`` merge into one KeyValue of repeated keys and one AnyValue of repeated values."""
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="rollscope/otlp_merged.proto", package="rollscope", syntax="proto3"
    )
    messages = {
        "Request": [(1, "resource_spans", "Resource", True)],
        "Resource": [(2, "scope_spans", "Scope", True)],
        "Scope": [(2, "spans", "Span", False)],
        "Span": [
            (9, "attributes", "KeyValue", False),
            (11, "events", f.TYPE_BYTES, True),
            (15, "status", f.TYPE_BYTES, True),
        ],
        "KeyValue": [(1, "key", f.TYPE_STRING, True), (2, "value", "AnyValue", False)],
        "AnyValue": [
            (1, "string_value", f.TYPE_STRING, True),
            (2, "bool_value", f.TYPE_BOOL, True),
            (3, "int_value", f.TYPE_INT64, True),
            (4, "double_value", f.TYPE_DOUBLE, True),
        ],
    }
    for name, fields in messages.items():
        message = file.message_type.add(name=name)
        for number, field_name, kind, repeated in fields:
            field = message.field.add(name=field_name, number=number)
            field.label = f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL
            if isinstance(kind, str):
                field.type, field.type_name = f.TYPE_MESSAGE, f".rollscope.{kind}"
            else:
                field.type = kind
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_MERGED_REQUEST = message_factory.GetMessageClass(_merged_schema().FindMessageTypeByName("rollscope.Request"))


class _Merged:
    """The request parsed with the merged schema, once and only when a scope has enough spans."""

    def __init__(self, body: bytes):
        self.body = body
        self.request = None

    def scope(self, resource: int, scope: int):
        """That scope's merged Span (its attributes, every event and every non-empty status), or None when
        the merged parse fails (invalid UTF-8, say)."""
        if self.request is None:
            try:
                self.request = _MERGED_REQUEST.FromString(self.body)
            except DecodeError:
                self.request = False
        if self.request is False:
            return None
        return self.request.resource_spans[resource].scope_spans[scope].spans


def span_attributes(per_span: list, merged=None) -> list[dict]:
    """Each span's encoded KeyValues (``Span.attributes`` as declared above) into its attribute dict: the
    same dicts, keys in the same order, as ``dict(map(_KEY_VALUES.__getitem__, encoded))``. ``merged``: the
    scope's merged Span (``_Merged.scope``), or None."""
    flat = list(chain.from_iterable(per_span))
    pairs = None
    if len(flat) >= _BULK_MIN and merged is not None:
        pairs = _bulk_key_values(flat, merged)
    if pairs is None:
        pair = _KEY_VALUES.__getitem__
        return [dict(map(pair, encoded)) for encoded in per_span]
    return list(map(dict, map(islice, repeat(zip(*pairs, strict=True)), map(len, per_span))))


def _bulk_key_values(flat: list[bytes], merged) -> tuple[list, list] | None:
    """Keys and values of encoded KeyValues, in their order, or None when one is not laid out plainly."""
    n = len(flat)
    lengths = np.fromiter(map(len, flat), np.int64, n)
    starts = np.cumsum(lengths) - lengths
    blob = np.frombuffer(b"".join(flat) + _PAD, np.uint8)
    key_size = blob[starts + 1].astype(np.int64)
    p = starts + 2 + key_size  # the value's tag
    value_size = blob[p + 1].astype(np.int64)  # the AnyValue's, its tag included
    tag, q, size = (
        blob[p + 2],
        p + 3,
        value_size - 1,
    )  # the AnyValue's tag, where its payload starts, its size
    if not (
        (lengths >= 5)
        & (blob[starts] == _TAG_KEY)
        & (key_size < _ONE_BYTE_LENGTH)
        & (blob[p] == _TAG_VALUE)
        & (value_size >= 2)
        & (value_size < _ONE_BYTE_LENGTH)
        & (lengths == key_size + value_size + 4)
    ).all():
        return None
    is_string, is_bool, is_int, is_double = (
        tag == _TAG_STRING,
        tag == _TAG_BOOL,
        tag == _TAG_INT,
        tag == _TAG_DOUBLE,
    )
    # each AnyValue is its tag and exactly one value: a string's length is the rest, a double is 8 bytes, a
    # varint ends on the AnyValue's last byte (and its earlier bytes all continue it)
    last = blob[q + size - 1]
    one_value = (
        (is_string & (blob[q] == size - 1))
        | (is_double & (size == 8))
        | ((is_bool | is_int) & (size <= 10) & (last < 0x80))
    )
    for i in range(int(size[is_bool | is_int].max(initial=1)) - 1):
        one_value &= ~(is_bool | is_int) | (size - 1 <= i) | (blob[q + i] >= 0x80)
    if not one_value.all():
        return None
    kv = merged.attributes
    if len(kv.key) != n:
        return None
    value = kv.value
    values = np.empty(n, object)
    for is_type, merged_values in (
        (is_string, value.string_value),
        (is_bool, value.bool_value),
        (is_int, value.int_value),
        (is_double, value.double_value),
    ):
        if len(merged_values) != np.count_nonzero(is_type):
            return None
        values[is_type] = list(merged_values)
    return list(kv.key), values.tolist()


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
    merged = _Merged(body)
    for i, resource_spans in enumerate(request.resource_spans):
        attributes = dict(map(_KEY_VALUES.__getitem__, resource_spans.resource.attributes))
        count = sum(len(ss.spans) for ss in resource_spans.scope_spans)
        resource = _resource(attributes, default_run_id, decoded, count)
        if resource is None:
            for scope_spans in resource_spans.scope_spans:
                _read_attributes(scope_spans.spans)
            continue
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            scope_name = scope_spans.scope.name or None
            _protobuf_spans(decoded, resource, scope_spans.spans, scope_name, partial(merged.scope, i, j))
    return decoded


def _protobuf_spans(
    decoded: Decoded, resource: ResourceRow, spans, scope_name: str | None, merged=None
) -> None:
    """The hot loop, one comprehension per field: a scope's spans into a ``Part``. ``merged`` gives the
    scope's spans as one merged Span (``_Merged.scope``); not when some of its spans were left out."""
    spans = list(spans)  # one Python wrapper per span, not one per field read
    trace_ids, span_ids, parents, starts, ends = (list(map(get, spans)) for get in _ID_AND_TIME_FIELDS)
    if not (
        _valid_ids(trace_ids, span_ids, parents)
        and max(starts, default=0) <= _INT64_MAX
        and max(ends, default=0) <= _INT64_MAX
    ):
        return _protobuf_spans(decoded, resource, _keep_valid(decoded, resource, spans), scope_name)
    from_bytes = int.from_bytes
    merged = merged() if merged is not None and len(spans) >= _MERGED_MIN_SPANS else None
    if merged is not None and not merged.status:  # no span has a status: all unset
        statuses = [_STATUSES[b""]] * len(spans)
    else:
        statuses = list(map(_STATUSES.__getitem__, map(_STATUS, spans)))
    fixed = {
        "trace_id": trace_ids,
        "span_id": list(map(from_bytes, span_ids, repeat("big"))),
        "parent_span_id": [from_bytes(b, "big") if b else None for b in parents],
        "name": list(map(_NAME, spans)),
        "span_kind": list(map(_SPAN_KINDS.get, map(_KIND, spans), repeat("unspecified"))),
        "start_ns": starts,
        "end_ns": ends,
        "status_code": list(map(itemgetter(0), statuses)),
        "status_message": list(map(itemgetter(1), statuses)),
        "scope_name": [scope_name] * len(spans),
    }
    attributes = span_attributes(list(map(_ATTRIBUTES, spans)), merged)
    events = {}
    if merged is None or merged.events:
        events = {i: [_protobuf_event(e) for e in s.events] for i, s in enumerate(spans) if s.events}
    if spans:
        decoded.parts.append(Part(resource, fixed, attributes, events))


_ID_AND_TIME_FIELDS = tuple(
    map(attrgetter, ("trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano"))
)
_STATUS, _NAME, _KIND, _ATTRIBUTES = map(attrgetter, ("status", "name", "kind", "attributes"))


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
    request = parse_json(body)
    resources = []
    for i, rs in enumerate(_list(_object(request, "request"), "resourceSpans", "request")):
        where = f"resourceSpans[{i}]"
        rs = _object(rs, where)
        attributes = _json_attributes(
            _object(rs.get("resource", {}), f"{where}.resource"), f"{where}.resource"
        )
        resources.append((attributes, _json_scopes(rs, where)))
    decoded = Decoded(sum(len(chunk) for _, chunks in resources for chunk in chunks))
    for attributes, chunks in resources:
        resource = _resource(attributes, default_run_id, decoded, sum(map(len, chunks)))
        if resource is None:
            continue
        for chunk in chunks:
            if isinstance(chunk, _JsonColumns):
                decoded.parts.append(Part(resource, chunk.fixed, chunk.attributes, {}))
            else:
                _json_add(decoded, resource, chunk)
    return decoded


def parse_json(body: bytes) -> object:
    """The body's JSON value: by orjson when it is installed, else (or when orjson refuses it) by the standard
    library, which then decides and words the 400.

    ``json.loads`` was about a quarter of the receiver's CPU on OTLP/JSON; orjson builds the same objects in
    about half the time. It is stricter (UTF-8 only, no byte-order mark, no ``NaN`` literal), so what it
    refuses goes to the standard library and the receiver accepts exactly what it accepted without orjson.
    One difference remains, outside what OTLP allows: an integer literal beyond 64 bits arrives as the
    nearest float instead of an exact int (int64 fields are decimal strings in OTLP/JSON).
    ``tests/test_receiver_attributes.py`` holds the two parsers to the same rows and refusals."""
    if _fast_loads is not None:
        try:
            return _fast_loads(body)
        except ValueError:  # orjson.JSONDecodeError
            pass
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise MalformedPayload(f"body is not JSON: {e}") from None


def _json_scopes(rs: dict, where: str) -> list:
    """Each scope's spans: a ``_JsonColumns`` when they could be read a column at a time, else span dicts."""
    chunks = []
    for j, ss in enumerate(_list(rs, "scopeSpans", where)):
        here = f"{where}.scopeSpans[{j}]"
        ss = _object(ss, here)
        scope_name = _string(_object(ss.get("scope", {}), f"{here}.scope"), "name", f"{here}.scope") or None
        spans = _list(ss, "spans", here)
        columns = _plain_json_columns(spans, scope_name) if len(spans) >= _JSON_COLUMNS_MIN else None
        if columns is not None:
            chunks.append(columns)
            continue
        chunks.append(
            [
                _plain_json_span(span, scope_name) or _json_span(span, scope_name, f"{here}.spans[{k}]")
                for k, span in enumerate(spans)
            ]
        )
    return chunks


# A scope's spans as SDKs write them are read a column at a time: each field of every span by one ``map`` in
# C, checked by the set of its types, rather than span by span. Anything else (events, string enums, ids or
# times out of range, an attribute that is not a plain string, int, double or bool) returns None, and the
# scope is read span by span, which rejects or stores each as before.

_JSON_COLUMNS_MIN = 16
_PLAIN_JSON_VALUES = {
    ("stringValue", str),
    ("intValue", str),
    ("intValue", int),
    ("doubleValue", float),
    ("boolValue", bool),
}


class _JsonColumns(NamedTuple):
    """A scope's spans, all storable: ``Part`` columns and attribute dicts."""

    fixed: dict[str, list]
    attributes: list[dict]

    def __len__(self) -> int:
        return len(self.attributes)


def _column(spans: list, name: str, default: object) -> list:
    return list(map(dict.get, spans, repeat(name), repeat(default)))


def _only(values: list, *types: type) -> bool:
    return set(map(type, values)) <= set(types)


def _plain_json_columns(spans: list, scope_name: str | None) -> _JsonColumns | None:
    """The scope's spans read a column at a time, or None when one is not as SDKs write it (or not valid:
    the span-by-span path then rejects it with its reason)."""
    if not _only(spans, dict) or any(_column(spans, "events", None)):
        return None
    ids = [_column(spans, key, "") for key in ("traceId", "spanId", "parentSpanId")]
    names, kinds = _column(spans, "name", ""), _column(spans, "kind", 0)
    statuses, attributes = _column(spans, "status", {}), _column(spans, "attributes", [])
    if not (
        all(_only(column, str) for column in ids)
        and _only(names, str)
        and _only(kinds, int)
        and set(kinds) <= _SPAN_KINDS.keys()
        and _only(statuses, dict)
        and _only(attributes, list)
    ):
        return None
    codes, messages = _column(statuses, "code", 0), _column(statuses, "message", "")
    starts, ends = (
        _json_uints(_column(spans, "startTimeUnixNano", 0)),
        _json_uints(_column(spans, "endTimeUnixNano", 0)),
    )
    if not (_only(codes, int) and set(codes) <= _STATUS_CODES.keys() and _only(messages, str)) or None in (
        starts,
        ends,
    ):
        return None
    try:
        trace_ids, span_ids, parents = (list(map(bytes.fromhex, column)) for column in ids)
    except ValueError:
        return None
    if not (
        _valid_ids(trace_ids, span_ids, parents) and max(starts) <= _INT64_MAX and max(ends) <= _INT64_MAX
    ):
        return None
    pairs = _json_key_values(list(chain.from_iterable(attributes)))
    if pairs is None:
        return None
    pairs = zip(*pairs, strict=True)
    from_bytes = int.from_bytes
    fixed = {
        "trace_id": trace_ids,
        "span_id": list(map(from_bytes, span_ids, repeat("big"))),
        "parent_span_id": [from_bytes(b, "big") if b else None for b in parents],
        "name": names,
        "span_kind": list(map(_SPAN_KINDS.__getitem__, kinds)),
        "start_ns": starts,
        "end_ns": ends,
        "status_code": list(map(_STATUS_CODES.__getitem__, codes)),
        "status_message": [m or None for m in messages],
        "scope_name": [scope_name] * len(spans),
    }
    return _JsonColumns(fixed, list(map(dict, map(islice, repeat(pairs), map(len, attributes)))))


def _json_uints(values: list) -> list[int] | None:
    """Timestamps as SDKs write them (decimal strings, or JSON integers) within uint64, else None."""
    if _only(values, str):
        if not (all(map(str.isascii, values)) and all(map(str.isdigit, values))):
            return None
        values = list(map(int, values))
    elif not _only(values, int):
        return None
    return values if not values or (min(values) >= 0 and max(values) <= _UINT64_MAX) else None


def _json_key_values(kvs: list) -> tuple[list, list] | None:
    """Keys and values of ``{"key": k, "value": {"<kind>Value": v}}`` attributes as SDKs write a string,
    int, double or bool (what ``_plain_json_attribute`` reads), or None when one is not."""
    if not (_only(kvs, dict) and set(map(len, kvs)) <= {2}):
        return None
    try:
        keys, values = list(map(_KEY, kvs)), list(map(_VALUE, kvs))
    except KeyError:
        return None
    if not (_only(keys, str) and _only(values, dict) and set(map(len, values)) <= {1}):
        return None
    if not values:
        return keys, []
    items = list(map(dict.popitem, values))  # each value's one (kind, value); put back if not read here
    kinds, raw = zip(*items, strict=True)
    shapes = set(zip(kinds, map(type, raw), strict=True))
    raw = _json_plain_values(list(raw), kinds, shapes) if shapes <= _PLAIN_JSON_VALUES else None
    if raw is None:
        for value, (kind, v) in zip(values, items, strict=True):
            value[kind] = v
    return None if raw is None else (keys, raw)


_KEY, _VALUE = itemgetter("key"), itemgetter("value")


def _json_plain_values(raw: list, kinds: tuple, shapes: set) -> list | None:
    """``raw`` with int64 strings turned into ints; None when one is not a decimal int64/uint64. Every step
    is a ``map`` or ``compress`` in C: a Python loop over a request's thousands of values cost more."""
    if ("intValue", str) not in shapes and ("intValue", int) not in shapes:
        return raw
    where = list(compress(range(len(raw)), map(eq, kinds, repeat("intValue"))))
    given = list(map(raw.__getitem__, where))  # decimal strings, or JSON integers
    text = list(compress(given, map(is_, map(type, given), repeat(str))))
    if not (
        all(map(str.isascii, text)) and all(map(str.isdigit, map(methodcaller("removeprefix", "-"), text)))
    ):
        return None
    ints = list(map(int, given))
    if min(ints) < -(2**63) or max(ints) > _UINT64_MAX:
        return None
    deque(map(raw.__setitem__, where, ints), maxlen=0)
    return raw


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
