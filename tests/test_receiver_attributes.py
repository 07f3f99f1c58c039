"""Span attributes as the receiver reads them, a scope at a time when a request carries many: the same keys,
values, types and order as opentelemetry-proto's own classes read, whatever the values' shapes; a malformed
attribute among them still fails the whole request, as the official parser would."""

from __future__ import annotations

import json
import math
import random

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList

from benchmarks.fixtures.otlp_json import encode_json
from rollscope.collectors import otlp, otlp_json, otlp_protobuf
from tests.test_receiver_fuzz import _JSON_BREAKAGES

KEYS = [
    "rl.turn.index",
    "gen_ai.usage.input_tokens",
    "gen_ai.response.id",
    "x",
    "clé.ünïcode",
    "k" * 125,  # the longest key with a one-byte length in its KeyValue
    "k" * 126,
]
INTS = [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -(2**63), -128]
DOUBLES = [0.0, -0.0, 1.5, -2.25e-300, 1e308, float("inf"), float("-inf"), float("nan")]
STRINGS = ["", "a", "qwen3-8b", "ünï\x00cødé ✓", "s" * 123, "s" * 124, "s" * 125]  # 125: longest one-byte


def _key(rnd: random.Random, other: float) -> str:
    if rnd.random() < other:
        return rnd.choice(["long." + "k" * 200, ""])  # a two-byte length; no key field at all
    return rnd.choice(KEYS)


def _plain_value(rnd: random.Random, finite: bool) -> AnyValue:
    kind = rnd.randrange(4)
    if kind == 0:
        return AnyValue(string_value=rnd.choice([*STRINGS, f"id-{rnd.getrandbits(64):x}"]))
    if kind == 1:
        return AnyValue(int_value=rnd.choice([*INTS, rnd.randint(-(2**63), 2**63 - 1)]))
    if kind == 2:
        doubles = [d for d in DOUBLES if not finite or math.isfinite(d)]
        return AnyValue(double_value=rnd.choice([*doubles, rnd.uniform(-1e6, 1e6)]))
    return AnyValue(bool_value=rnd.random() < 0.5)


def _other_value(rnd: random.Random) -> AnyValue | None:
    return rnd.choice(
        [
            AnyValue(string_value="s" * 126),  # a two-byte length
            AnyValue(string_value="🙂" * 100),
            AnyValue(bytes_value=b"\x00\xff"),
            AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="b")])),
            AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="n", value=AnyValue(double_value=2.0))])),
            AnyValue(),  # a value with nothing set
            None,  # a KeyValue with a key and no value
        ]
    )


def _request(seed: int, spans: int, other: float, finite: bool = False) -> bytes:
    """``spans`` spans of 0-12 attributes each, keys repeating within a span now and then; a share ``other``
    of the keys and values are not laid out as SDKs write a short key and a string, int, double or bool.
    ``finite``: no NaN or infinite doubles (which OTLP/JSON writes as strings)."""
    rnd = random.Random(seed)
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    for i in range(spans):
        span = scope_spans.spans.add(trace_id=bytes(15) + b"\x01", span_id=(i + 1).to_bytes(8, "big"))
        for _ in range(rnd.randint(0, 12)):
            kv = span.attributes.add(key=_key(rnd, other))
            value = _other_value(rnd) if rnd.random() < other else _plain_value(rnd, finite)
            if value is not None:
                kv.value.CopyFrom(value)
    return request.SerializeToString()


def _official(body: bytes) -> list[list[tuple[str, str, str]]]:
    """Each span's attributes as opentelemetry-proto's classes read them: a later duplicate key replaces the
    value and keeps the place of the first, as in a dict."""
    request = ExportTraceServiceRequest.FromString(body)
    spans = request.resource_spans[0].scope_spans[0].spans
    return [_typed({kv.key: otlp_protobuf.any_value(kv.value) for kv in span.attributes}) for span in spans]


def _received(body: bytes) -> list[list[tuple[str, str, str]]]:
    (part,) = otlp_protobuf.decode_protobuf(body, default_run_id="exp-1").parts
    return [_typed(attributes) for attributes in part.attributes]


def _typed(attributes: dict) -> list[tuple[str, str, str]]:
    """Keys in order with each value's type and repr (so 1 and 1.0 and True differ, and nan equals nan)."""
    return [(key, type(value).__name__, repr(value)) for key, value in attributes.items()]


@pytest.mark.parametrize("seed", range(4))
def test_many_plain_attributes_read_as_the_official_classes_read_them(seed):
    body = _request(seed, spans=400, other=0.0)
    expected = _official(body)
    assert sum(map(len, expected)) > 1000  # enough to be read a scope at a time
    assert _received(body) == expected


@pytest.mark.parametrize("seed", range(4))
def test_arrays_bytes_and_empty_values_among_them_read_the_same(seed):
    body = _request(seed, spans=300, other=0.05)
    assert _received(body) == _official(body)


def test_a_few_attributes_read_the_same_as_many():
    body = _request(7, spans=3, other=0.0)
    assert _received(body) == _official(body)


def test_a_string_that_is_not_utf8_among_many_fails_the_request_as_the_official_parser_does():
    request = ExportTraceServiceRequest.FromString(_request(1, spans=300, other=0.0))
    span = request.resource_spans[0].scope_spans[0].spans[150]
    span.attributes.add(key="bad", value=AnyValue(string_value="<placeholder>"))
    body = request.SerializeToString().replace(b"<placeholder>", b"\xff" * len("<placeholder>"))
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(body)
    with pytest.raises(otlp.MalformedPayload, match="attribute"):
        otlp_protobuf.decode_protobuf(body, default_run_id="exp-1")


def test_a_key_that_is_not_utf8_among_many_fails_the_request():
    request = ExportTraceServiceRequest.FromString(_request(2, spans=300, other=0.0))
    request.resource_spans[0].scope_spans[0].spans[10].attributes.add(
        key="<key>", value=AnyValue(int_value=5)
    )
    body = request.SerializeToString().replace(b"<key>", b"\xc3\x28key")
    with pytest.raises(otlp.MalformedPayload, match="attribute"):
        otlp_protobuf.decode_protobuf(body, default_run_id="exp-1")


@pytest.mark.parametrize(
    ("seed", "other", "finite"), [(0, 0.0, True), (1, 0.0, True), (2, 0.0, False), (3, 0.05, False)]
)
def test_the_same_attributes_sent_as_otlp_json_read_the_same(seed, other, finite):
    body = _request(seed, spans=300, other=other, finite=finite)
    (part,) = otlp_json.decode_json(encode_json(ExportTraceServiceRequest.FromString(body)), "exp-1").parts
    assert [_typed(attributes) for attributes in part.attributes] == _official(body)


def _json_request(seed: int) -> dict:
    return json.loads(encode_json(ExportTraceServiceRequest.FromString(_request(seed, 300, 0.0, True))))


@pytest.mark.parametrize("breakage", range(len(_JSON_BREAKAGES)))
def test_a_malformed_span_among_many_json_spans_fails_the_request(breakage):
    request = _json_request(5)
    _JSON_BREAKAGES[breakage](request)
    with pytest.raises(otlp.MalformedPayload):
        otlp_json.decode_json(json.dumps(request).encode(), "exp-1")


def test_json_spans_with_unusable_ids_or_times_among_many_are_counted_and_the_rest_kept():
    request = _json_request(6)
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[3]["traceId"] = "00" * 16
    spans[7]["startTimeUnixNano"] = str(2**63)
    decoded = otlp_json.decode_json(json.dumps(request).encode(), "exp-1")
    assert (decoded.received, decoded.accepted, decoded.rejected) == (300, 298, {"bad_id": 1, "bad_time": 1})


def test_events_and_statuses_of_a_few_spans_among_many_are_kept():
    request = ExportTraceServiceRequest.FromString(_request(8, spans=40, other=0.0))
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[5].events.add(name="retry", time_unix_nano=7).attributes.add(key="n", value=AnyValue(int_value=2))
    spans[9].status.code, spans[9].status.message = 2, "exit 1"
    (part,) = otlp_protobuf.decode_protobuf(request.SerializeToString(), "exp-1").parts
    assert part.events == {5: [{"name": "retry", "time_ns": 7, "attributes": {"n": 2}}]}
    statuses = list(zip(part.fixed["status_code"], part.fixed["status_message"], strict=True))
    assert statuses[9] == ("error", "exit 1")
    assert set(statuses[:9] + statuses[10:]) == {("unset", None)}


def _outcome(body: bytes) -> str:
    """What the JSON reader makes of a body, comparably: its parts and rejections, or that it refused it."""
    try:
        decoded = otlp_json.decode_json(body, "exp-1")
    except otlp.MalformedPayload:
        return "400"
    return repr(([(p.resource, p.fixed, p.attributes, p.events) for p in decoded.parts], decoded.rejected))


def test_otlp_json_reads_the_same_with_orjson_as_with_the_standard_library(monkeypatch):
    """orjson (the `fast` extra) is stricter than ``json.loads``; whatever it refuses is left to the standard
    library, so a receiver with it stores and refuses exactly what one without it does."""
    pytest.importorskip("orjson")
    bodies = [encode_json(ExportTraceServiceRequest.FromString(_request(s, 40, 0.05))) for s in range(4)]
    for breakage in _JSON_BREAKAGES:
        request = _json_request(5)
        breakage(request)
        bodies.append(json.dumps(request).encode())
    text = bodies[0].decode()
    bodies += [
        b"\xef\xbb\xbf" + bodies[0],  # a byte-order mark: orjson refuses it, json.loads reads past it
        text.encode("utf-16"),  # json.loads detects UTF-16 and UTF-32; orjson reads UTF-8 only
        text.replace('"doubleValue": 2.0', '"doubleValue": NaN', 1).encode(),  # not JSON; json.loads takes it
        bodies[1][: len(bodies[1]) // 2],
        b'{"resourceSpans": [], "x": "\\ud800"}',  # a lone surrogate
        b'{"resourceSpans": []} trailing',
    ]
    fast = [_outcome(body) for body in bodies]
    monkeypatch.setattr(otlp_json, "_fast_loads", None)
    assert fast == [_outcome(body) for body in bodies]
    assert fast.count("400") == len(_JSON_BREAKAGES) + 2  # the breakages, the cut body, the trailing text
    assert "400" not in fast[:4] and fast[-6] == fast[0] and fast[-5] == fast[0] and "nan" in fast[-4]
