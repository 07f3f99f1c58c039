"""OTLP protobuf trace requests into rows: the receiver's hot loop (``decode_protobuf``), OTLP/HTTP and gRPC.

Separate from the OTLP/JSON reader (``collectors.otlp_json``) because it shares nothing with it but the
decoded request (``collectors.otlp``): its speed comes from protobuf's own parser and a schema of its own.

Reading an attribute through the generated protobuf objects costs about a microsecond, so requests are parsed
with a copy of the opentelemetry-proto schema whose span and resource ``attributes`` are declared ``bytes``
(the wire format is the same): each attribute arrives as its encoded ``KeyValue`` and its decoded ``(key,
value)`` is cached by those bytes, since most attributes repeat across spans. An attribute not in the cache is
parsed directly when it has the plain layout SDKs write for a string, int, double or bool, and by the official
``KeyValue`` class otherwise, which is what rejects a malformed one.

Most values do not repeat, though (timings, token counts, ids), so a scope with many spans is read in bulk
(``span_attributes``): the request is parsed a second time with a schema that merges the scope's spans into
one message, so its keys and its string, int, double and bool values arrive as one list each from protobuf's C
parser, and numpy, reading the encoded attributes, says which list each value comes from and checks that each
attribute is laid out plainly; a scope where one is not takes the per-attribute path.
``tests/test_receiver_attributes.py`` holds the bulk reader to what the official classes read.
"""

from __future__ import annotations

import struct
from functools import partial
from itertools import chain, islice, repeat
from operator import attrgetter, itemgetter

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from rollscope.collectors.otlp import (
    INT64_MAX,
    SPAN_KINDS,
    STATUS_CODES,
    Decoded,
    MalformedPayload,
    Part,
    id_ok,
    resource_row,
    valid_ids,
)
from rollscope.collectors.rows import ResourceRow

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
        decoded = (STATUS_CODES.get(status.code, "unset"), status.message or None)
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
        resource = resource_row(attributes, default_run_id, decoded, count)
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
        valid_ids(trace_ids, span_ids, parents)
        and max(starts, default=0) <= INT64_MAX
        and max(ends, default=0) <= INT64_MAX
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
        "span_kind": list(map(SPAN_KINDS.get, map(_KIND, spans), repeat("unspecified"))),
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
        if not id_ok(s.trace_id, s.span_id, s.parent_span_id):
            decoded.reject("bad_id", run_id=resource.run_id)
        elif s.start_time_unix_nano > INT64_MAX or s.end_time_unix_nano > INT64_MAX:
            decoded.reject("bad_time", run_id=resource.run_id)
        else:
            kept.append(s)
            continue
        _read_attributes([s])
    return kept


def _protobuf_event(event: trace_pb2.Span.Event) -> dict:
    attributes = {kv.key: any_value(kv.value) for kv in event.attributes}
    return {"name": event.name, "time_ns": event.time_unix_nano, "attributes": attributes}
