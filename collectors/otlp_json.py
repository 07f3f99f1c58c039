"""OTLP/JSON trace requests into rows (``decode_json``): what curl, browsers and some Collector setups send.

Separate from the protobuf path (``collectors.otlp_protobuf``) because it shares nothing with it but the
decoded request (``collectors.otlp``): it reads JSON values, hex ids and lowerCamelCase names, and checks
every field itself so that a malformed request is named where it is malformed. A scope's spans as SDKs write
them are read a column at a time (``_plain_json_columns``) in the spirit of the protobuf path's bulk reader;
``tests/test_receiver_attributes.py`` holds it to what the field-by-field reader reads.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import deque
from itertools import chain, compress, islice, repeat
from operator import eq, is_, itemgetter, methodcaller
from typing import NamedTuple

from rollscope.collectors.otlp import (
    INT64_MAX,
    SPAN_KINDS,
    STATUS_CODES,
    UINT64_MAX,
    Decoded,
    MalformedPayload,
    Part,
    id_ok,
    resource_row,
    valid_ids,
)
from rollscope.collectors.rows import ResourceRow
from rollscope.store.schema import SPAN_FIELDS

try:  # `pip install 'rollscope[fast]'`: OTLP/JSON bodies parse in about half the time (see parse_json)
    from orjson import loads as _fast_loads
except ImportError:  # the default install: the standard library alone
    _fast_loads = None


# --- OTLP/JSON ------------------------------------------------------------------------------------------------
#
# Why a hand-written reader: protobuf's own ``json_format.ParseDict`` (after turning the hex ids into the
# base64 it expects) followed by the protobuf path (``collectors.otlp_protobuf``) costs about 12x this reader per span
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
        resource = resource_row(attributes, default_run_id, decoded, sum(map(len, chunks)))
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
        and set(kinds) <= SPAN_KINDS.keys()
        and _only(statuses, dict)
        and _only(attributes, list)
    ):
        return None
    codes, messages = _column(statuses, "code", 0), _column(statuses, "message", "")
    starts, ends = (
        _json_uints(_column(spans, "startTimeUnixNano", 0)),
        _json_uints(_column(spans, "endTimeUnixNano", 0)),
    )
    if not (_only(codes, int) and set(codes) <= STATUS_CODES.keys() and _only(messages, str)) or None in (
        starts,
        ends,
    ):
        return None
    try:
        trace_ids, span_ids, parents = (list(map(bytes.fromhex, column)) for column in ids)
    except ValueError:
        return None
    if not (valid_ids(trace_ids, span_ids, parents) and max(starts) <= INT64_MAX and max(ends) <= INT64_MAX):
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
        "span_kind": list(map(SPAN_KINDS.__getitem__, kinds)),
        "start_ns": starts,
        "end_ns": ends,
        "status_code": list(map(STATUS_CODES.__getitem__, codes)),
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
    return values if not values or (min(values) >= 0 and max(values) <= UINT64_MAX) else None


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
    if min(ints) < -(2**63) or max(ints) > UINT64_MAX:
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
        or kind not in SPAN_KINDS
        or type(code) is not int
        or code not in STATUS_CODES
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
        "span_kind": SPAN_KINDS[kind],
        "start_ns": start,
        "end_ns": end,
        "status_code": STATUS_CODES[code],
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
        if not id_ok(span["trace_id"], span["span_id"], span["parent_span_id"]):
            decoded.reject("bad_id", run_id=resource.run_id)
        elif not (0 <= span["start_ns"] <= INT64_MAX and 0 <= span["end_ns"] <= INT64_MAX):
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
        "span_kind": _enum(span, "kind", where, SPAN_KINDS, "SPAN_KIND_"),
        "start_ns": _integer(span, "startTimeUnixNano", where),
        "end_ns": _integer(span, "endTimeUnixNano", where),
        "status_code": _enum(status, "code", f"{where}.status", STATUS_CODES, "STATUS_CODE_"),
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
