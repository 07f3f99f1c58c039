"""Thousands of malformed, truncated, wrongly typed and oversized bodies: every one gets a 4xx, the receiver
stays up, and the store ends up holding exactly the spans of the valid requests sent among them."""

from __future__ import annotations

import copy
import gzip
import http.client
import json
import random

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rollscope import queries
from rollscope.collectors.receiver import ReceiverConfig, running
from tests.fixtures.receiver import JSON, PROTOBUF, finished_spans, json_body, protobuf_body, span_ids

MAX_BODY = 64 * 1024


def _official_rejects(body: bytes) -> bool:
    """The oracle for protobuf: what opentelemetry-proto's own class refuses to parse."""
    try:
        ExportTraceServiceRequest.FromString(body)
    except Exception:
        return True
    return False


def _mutate_protobuf(rnd: random.Random, body: bytes) -> bytes:
    kind = rnd.randrange(3)
    if kind == 0:
        return body[: rnd.randrange(1, len(body))]
    if kind == 1:
        data = bytearray(body)
        for _ in range(rnd.randint(1, 8)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        return bytes(data)
    return rnd.randbytes(rnd.randint(1, 300))


def _first_span(request: dict) -> dict:
    return request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]


_JSON_BREAKAGES = [
    lambda r: r.__setitem__("resourceSpans", {"not": "a list"}),
    lambda r: r["resourceSpans"][0].__setitem__("scopeSpans", "nope"),
    lambda r: r["resourceSpans"][0]["scopeSpans"][0].__setitem__("spans", [5]),
    lambda r: _first_span(r).__setitem__("traceId", 123),
    lambda r: _first_span(r).__setitem__("spanId", "not-hex!"),
    lambda r: _first_span(r).__setitem__("startTimeUnixNano", "soon"),
    lambda r: _first_span(r).__setitem__("endTimeUnixNano", 1.5),
    lambda r: _first_span(r).__setitem__("name", ["list"]),
    lambda r: _first_span(r).__setitem__("kind", "SPAN_KIND_SIDEWAYS"),
    lambda r: _first_span(r).__setitem__("status", "ok"),
    lambda r: _first_span(r).__setitem__("attributes", {"k": "v"}),
    lambda r: _first_span(r).__setitem__("events", [{"timeUnixNano": "x"}]),
    lambda r: _first_span(r)["attributes"].append({"key": 7, "value": {}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"intValue": "12a"}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"intValue": True}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"stringValue": 5}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"doubleValue": "fast"}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"boolValue": "yes"}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"bytesValue": "!!!"}}),
    lambda r: _first_span(r)["attributes"].append(
        {"key": "k", "value": {"stringValue": "a", "intValue": "1"}}
    ),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"arrayValue": {"values": 5}}}),
    lambda r: _first_span(r)["attributes"].append({"key": "k", "value": {"kvlistValue": []}}),
]


def _malformed(rnd: random.Random, proto: bytes, js: bytes) -> tuple[bytes, dict, int] | None:
    """One bad request and the status it must get; None when a protobuf mutation happens to stay valid."""
    kind = rnd.randrange(10)
    if kind < 4:
        body = _mutate_protobuf(rnd, proto)
        return (body, {"Content-Type": PROTOBUF}, 400) if _official_rejects(body) else None
    if kind == 4:
        return js[: rnd.randrange(1, len(js))], {"Content-Type": JSON}, 400
    if kind == 5:
        request = json.loads(js)
        rnd.choice(_JSON_BREAKAGES)(request)
        return json.dumps(request).encode(), {"Content-Type": JSON}, 400
    if kind == 6:
        return rnd.randbytes(rnd.randint(1, 200)) + b"\xff", {"Content-Type": JSON}, 400
    if kind == 7:
        headers = {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}
        if rnd.random() < 0.7:
            gz = gzip.compress(proto)
            return gz[: rnd.randrange(1, len(gz))], headers, 400
        return gzip.compress(b"\0" * (MAX_BODY + 1)), headers, 413
    if kind == 8:
        return (
            rnd.randbytes(MAX_BODY + rnd.randint(1, 2000)),
            {"Content-Type": rnd.choice([PROTOBUF, JSON])},
            413,
        )
    media = rnd.choice(["text/plain", "application/grpc", "", "application/xml"])
    return proto, {"Content-Type": media} if media else {}, 415


def _fuzz(store, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    base = finished_spans(6, seed=seed)
    proto, js = protobuf_body(base), json_body(base)
    sent_valid: set[int] = set()
    statuses: dict[int, int] = {}
    with running(ReceiverConfig(store=store, port=0, max_request_bytes=MAX_BODY, commit_window=0.001)) as url:
        conn = http.client.HTTPConnection(*url.removeprefix("http://").split(":"), timeout=30)
        for i in range(n):
            if rnd.random() < 0.05:
                spans = finished_spans(rnd.randint(1, 5), seed=seed * 100_000 + i)
                as_json = rnd.random() < 0.5
                body = json_body(spans) if as_json else protobuf_body(spans)
                request = (body, {"Content-Type": JSON if as_json else PROTOBUF}, 200)
                sent_valid |= span_ids(spans)
            else:
                request = _malformed(rnd, proto, js)
                if request is None:
                    continue
            body, headers, expected = request
            conn.request("POST", "/v1/traces", body, headers)
            response = conn.getresponse()
            answer = response.read()
            assert response.status == expected, (i, headers, body[:80], answer[:200])
            statuses[expected] = statuses.get(expected, 0) + 1
            if response.will_close:
                conn.close()
        conn.request("GET", "/health")
        health = json.loads(conn.getresponse().read())
        conn.close()
    assert health["status"] == "ok" and health["spans_accepted"] == len(sent_valid)
    assert set(statuses) == {200, 400, 413, 415}
    stored = queries.connect(store).execute("SELECT span_id FROM spans").fetchall()
    assert len(stored) == len(sent_valid)
    assert {row[0] for row in stored} == sent_valid


@pytest.mark.long  # hundreds of fuzzed requests
def test_fuzzed_requests_are_refused_and_only_valid_spans_are_stored(store):
    _fuzz(store, 2_000, seed=11)


@pytest.mark.slow
def test_fuzzed_requests_at_length(store):
    _fuzz(store, 30_000, seed=12)


def test_json_mutations_each_refuse_the_whole_request(store):
    """Every breakage on its own: nothing of a request with one malformed span is kept."""
    spans = finished_spans(3, seed=5)
    with running(ReceiverConfig(store=store, port=0, commit_window=0.001)) as url:
        conn = http.client.HTTPConnection(*url.removeprefix("http://").split(":"), timeout=30)
        for breakage in _JSON_BREAKAGES:
            request = copy.deepcopy(json.loads(json_body(spans)))
            breakage(request)
            conn.request("POST", "/v1/traces", json.dumps(request), {"Content-Type": JSON})
            response = conn.getresponse()
            assert (response.status, b"message" in response.read()) == (400, True)
        conn.close()
    assert queries.connect(store).execute("SELECT count(*) FROM spans").fetchone() == (0,)


def test_the_fast_attribute_parser_agrees_with_opentelemetry_proto():
    """Attributes missing the cache are parsed by hand when plainly laid out; on every such input (valid or
    mutated) the result must be what the generated KeyValue class gives, or a refusal where it refuses."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    from rollscope.collectors.otlp_protobuf import _plain_key_value, any_value

    rnd = random.Random(3)
    values = [
        lambda: AnyValue(int_value=rnd.choice([0, 1, 127, 128, 16383, 16384, -1, -(2**63), 2**63 - 1])),
        lambda: AnyValue(int_value=rnd.getrandbits(40)),
        lambda: AnyValue(double_value=rnd.random()),
        lambda: AnyValue(string_value=rnd.choice(["", "x", "ü" * rnd.randint(0, 90)])),
        lambda: AnyValue(bool_value=rnd.random() < 0.5),
    ]
    parsed = 0
    for _ in range(40_000):
        key = rnd.choice(["a", "gen_ai.usage.input_tokens", "k" * rnd.randint(0, 200), "é"])
        data = bytearray(KeyValue(key=key, value=rnd.choice(values)()).SerializeToString())
        for _ in range(rnd.choice([0, 0, 1, 2, 3])):
            _flip(rnd, data)
        plain = _plain_key_value(bytes(data))
        if plain is None:
            continue
        parsed += 1
        try:
            kv = KeyValue.FromString(bytes(data))
        except Exception:
            raise AssertionError(f"hand parser accepted what KeyValue refuses: {bytes(data)!r}") from None
        assert plain == (kv.key, any_value(kv.value)), bytes(data)
    assert parsed > 10_000


def _flip(rnd: random.Random, data: bytearray) -> None:
    """Overwrite, delete or insert one byte."""
    at, kind = rnd.randrange(len(data)), rnd.randrange(3)
    if kind == 0:
        data[at] = rnd.randrange(256)
    elif kind == 1:
        del data[at]
    else:
        data.insert(at, rnd.randrange(256))
