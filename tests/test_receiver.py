"""`rollscope collect` as OpenTelemetry clients see it: the official exporter, a plain OTLP/JSON client, and
the answers the OTLP/HTTP specification asks for (partial success, 400, 401, 413, 415, 429)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from rollscope import queries
from rollscope.app.cli import build_parser
from rollscope.collectors.group_commit import GroupCommit
from rollscope.collectors.otlp_protobuf import decode_protobuf
from rollscope.collectors.receiver import ReceiverConfig, running
from tests.conftest import rollscope
from tests.fixtures.receiver import JSON, PROTOBUF, finished_spans, get, json_body, post, protobuf_body


def serving(store, **options):
    return running(ReceiverConfig(store=store, port=0, commit_window=0.005, **options))


def sql(store, text: str) -> list[dict]:
    code, out, err = rollscope("sql", "--store", store, "--format", "json", text)
    assert (code, err) == (0, ""), err
    return json.loads(out)


def test_official_exporter_delivers_every_span_with_its_attributes(store):
    with serving(store) as url:
        resource = Resource({"rl.run.id": "exp-7", "service.name": "rollout-worker", "rl.compute.devices": 8})
        provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", compression=Compression.Gzip)
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128))
        tracer = provider.get_tracer("job")
        for i in range(300):
            attributes = {
                "rl.rollout.id": f"r{i // 3}",
                "rl.turn.index": i % 3,
                "gen_ai.usage.input_tokens": 1000 + i,
                "gen_ai.usage.output_tokens": 10,
                "gen_ai.latency.time_in_model_prefill": 0.25,
                "team.label": "blue",
                "team.tags": ("a", "b"),
            }
            with tracer.start_as_current_span("rl.turn", attributes=attributes):
                pass
        with tracer.start_as_current_span("execute_tool bash", attributes={"gen_ai.tool.name": "bash"}):
            pass
        provider.shutdown()

    turns = sql(
        store,
        "SELECT count(*) AS n, sum(input_tokens) AS prompt, sum(prefill_time_s) AS prefill, min(devices) AS devices,"
        " count(DISTINCT rollout_id) AS rollouts FROM turns",
    )
    assert turns == [
        {"n": 300, "prompt": 300 * 1000 + sum(range(300)), "prefill": 75.0, "devices": 8.0, "rollouts": 100}
    ]
    extras = sql(store, "SELECT DISTINCT attributes FROM spans WHERE name = 'rl.turn'")
    assert [json.loads(row["attributes"]) for row in extras] == [
        {"team.label": "blue", "team.tags": ["a", "b"]}
    ]
    assert sql(store, "SELECT tool_name FROM tools") == [{"tool_name": "bash"}]


def _any_value_request() -> dict:
    """OTLP/JSON as a hand-written client sends it: hex ids, int64 as strings, every AnyValue kind."""
    attributes = [
        {"key": "rl.rollout.id", "value": {"stringValue": "r-1"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "4096"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 64}},
        {"key": "rl.reward.score", "value": {"doubleValue": 0.5}},
        {"key": "x.list", "value": {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "two"}]}}},
        {"key": "x.map", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": True}}]}}},
        {"key": "x.bytes", "value": {"bytesValue": "AAEC"}},
        {"key": "x.empty", "value": {}},
    ]
    span = {
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "parentSpanId": "",
        "name": "rl.turn",
        "kind": 1,
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
        "attributes": attributes,
        "events": [{"timeUnixNano": "1544712660500000000", "name": "retry", "attributes": []}],
        "status": {"code": 2, "message": "timeout"},
    }
    resource = {"attributes": [{"key": "rl.run.id", "value": {"stringValue": "exp-7"}}]}
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": {"name": "hand"}, "spans": [span]}]}
        ]
    }


def test_otlp_json_client_keeps_every_value_kind(store):
    with serving(store) as url:
        request = urllib.request.Request(
            f"{url}/v1/traces", data=json.dumps(_any_value_request()).encode(), headers={"Content-Type": JSON}
        )
        with urllib.request.urlopen(request) as response:
            assert (response.status, response.headers["Content-Type"], json.loads(response.read())) == (
                200,
                JSON,
                {},
            )
    rows = sql(
        store,
        "SELECT trace_id, span_id, input_tokens, output_tokens, reward, status_code, status_message,"
        " attributes, events FROM spans",
    )
    row = rows[0]
    assert json.loads(row.pop("attributes")) == {
        "x.list": [1, "two"],
        "x.map": {"k": True},
        "x.bytes": "000102",
        "x.empty": None,
    }
    assert json.loads(row.pop("events")) == [
        {"name": "retry", "time_ns": 1544712660500000000, "attributes": {}}
    ]
    assert row == {
        "trace_id": "5b8efff798038103d269b633813fc60c",
        "span_id": 0xEEE19B7EC3C1B174,
        "input_tokens": 4096,
        "output_tokens": 64,
        "reward": 0.5,
        "status_code": "error",
        "status_message": "timeout",
    }


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
def test_spans_without_a_run_are_rejected_and_counted_never_dropped_silently(store, encoding):
    good, orphans = finished_spans(5, seed=1), finished_spans(3, run_id=None, seed=2)
    body = (protobuf_body if encoding == PROTOBUF else json_body)(good + orphans)
    with serving(store) as url:
        answer = post(url, body, encoding)
        health = get(url, "/health").json()
    assert answer.status == 200
    if encoding == PROTOBUF:
        partial = ExportTraceServiceResponse.FromString(answer.body).partial_success
        rejected, message = partial.rejected_spans, partial.error_message
    else:
        partial = answer.json()["partialSuccess"]
        rejected, message = int(partial["rejectedSpans"]), partial["errorMessage"]
    assert rejected == 3 and "3 without rl.run.id" in message and "--run-id" in message
    assert sql(store, "SELECT count(*) AS n FROM spans") == [{"n": 5}]
    assert (health["spans_received"], health["spans_accepted"], health["spans_rejected"]) == (8, 5, 3)


def test_run_id_option_names_the_run_of_spans_that_carry_none(store):
    with serving(store, run_id="vllm-run") as url:
        answer = post(url, protobuf_body(finished_spans(4, run_id=None) + finished_spans(2, run_id="exp-7")))
    assert ExportTraceServiceResponse.FromString(answer.body).partial_success.rejected_spans == 0
    assert sql(store, "SELECT run_id, count(*) AS n FROM spans GROUP BY run_id ORDER BY run_id") == [
        {"run_id": "exp-7", "n": 2},
        {"run_id": "vllm-run", "n": 4},
    ]


def _bomb() -> bytes:
    return gzip.compress(b"\x00" * (2 * 1024 * 1024))


@pytest.mark.parametrize(
    ("body", "headers", "status", "says"),
    [
        (b"\xff\xff\xff", {"Content-Type": PROTOBUF}, 400, b"not a protobuf"),
        (b'{"resourceSpans": [', {"Content-Type": JSON}, 400, b"not JSON"),
        (b'{"resourceSpans": {}}', {"Content-Type": JSON}, 400, b"resourceSpans: expected a JSON array"),
        (b"plain", {"Content-Type": "text/plain"}, 415, b"Content-Type must be"),
        (b"x", {"Content-Type": PROTOBUF, "Content-Encoding": "br"}, 415, b"Content-Encoding"),
        (b"\x1f\x8b not gzip", {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}, 400, b"gzip"),
        (b"\x00" * (1024 * 1024 + 1), {"Content-Type": PROTOBUF}, 413, b"limit"),
        (_bomb(), {"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}, 413, b"decompressed"),
    ],
    ids=[
        "bad-protobuf",
        "bad-json",
        "wrong-json-type",
        "text",
        "brotli",
        "bad-gzip",
        "too-large",
        "gzip-bomb",
    ],
)
def test_bad_requests_get_the_status_the_specification_names(store, body, headers, status, says):
    with serving(store, max_request_bytes=1024 * 1024) as url:
        answer = post(url, body, headers.pop("Content-Type"), headers)
        assert get(url, "/health").status == 200  # still up
    assert answer.status == status
    assert says in answer.body
    assert "retry-after" not in answer.headers


def test_a_token_is_required_when_one_is_set(store):
    body = protobuf_body(finished_spans(2))
    with serving(store, token="s3cret") as url:
        missing = post(url, body)
        wrong = post(url, body, headers={"Authorization": "Bearer nope"})
        health = get(url, "/health")
        right = post(url, body, headers={"Authorization": "Bearer s3cret"})
    assert [missing.status, wrong.status, health.status, right.status] == [401, 401, 401, 200]
    assert missing.headers["www-authenticate"] == "Bearer"
    assert sql(store, "SELECT count(*) AS n FROM spans") == [{"n": 2}]


def test_over_the_memory_budget_the_client_is_told_to_retry(store):
    """A body in flight holds budget; the next request is answered 429 with Retry-After, then accepted."""
    body = protobuf_body(finished_spans(50))
    with serving(store, max_request_bytes=len(body), max_pending_bytes=len(body)) as url:
        host, port = url.removeprefix("http://").split(":")
        slow = socket.create_connection((host, int(port)))
        head = f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PROTOBUF}\r\nContent-Length: {len(body)}\r\n\r\n"
        slow.sendall(head.encode() + body[:10])
        while get(url, "/health").json()["pending_bytes"] == 0:
            pass
        refused = post(url, body)
        slow.sendall(body[10:])
        assert slow.recv(100).startswith(b"HTTP/1.1 200")
        slow.close()
        accepted = post(url, body)
    assert (refused.status, refused.headers["retry-after"], accepted.status) == (429, "1", 200)
    assert sql(store, "SELECT count(*) AS n, count(DISTINCT span_id) AS spans FROM spans") == [
        {"n": 100, "spans": 50}
    ]


def test_health_counts_and_collector_stats(store):
    with serving(store) as url:
        post(url, protobuf_body(finished_spans(7)))
        post(url, b"junk")
        health = get(url, "/health").json()
    assert health["status"] == "ok"
    assert (health["spans_accepted"], health["requests"], health["runs"]) == (
        7,
        {"200": 1, "400": 1},
        ["exp-7"],
    )
    stats = (
        queries.connect(store)
        .execute(
            "SELECT source, service_name, spans_received, spans_exported, spans_failed, segments_published"
            " FROM collector_stats"
        )
        .fetchall()
    )
    assert stats == [("receiver", "rollscope-collect", 7, 7, 0, 1)]


def test_the_command_binds_localhost_and_the_otlp_port_by_default():
    args = build_parser().parse_args(["collect", "--store", "s"])
    assert (args.host, args.port, args.token, args.run_id) == ("127.0.0.1", 4318, None, None)


def test_a_wrongly_typed_resource_value_is_kept_as_json_and_fails_nothing(store):
    request = json.loads(json_body(finished_spans(2)))
    request["resourceSpans"][0]["resource"]["attributes"] += [
        {"key": "rl.compute.devices", "value": {"stringValue": "eight"}},
        {"key": "rl.model.parameters", "value": {"stringValue": "8000000000"}},
    ]
    with serving(store) as url:
        assert post(url, json.dumps(request).encode(), JSON).status == 200
        assert post(url, protobuf_body(finished_spans(3, seed=4))).status == 200
    rows = sql(
        store,
        "SELECT devices, model_parameters, resource_attributes->>'$.\"rl.compute.devices\"' AS kept, count(*) AS n"
        " FROM spans GROUP BY ALL ORDER BY n",
    )
    assert rows == [
        {"devices": None, "model_parameters": 8_000_000_000, "kept": "eight", "n": 2},
        {"devices": None, "model_parameters": None, "kept": None, "n": 3},
    ]


def test_a_commit_window_waits_for_a_request_already_being_decoded(store):
    """Two requests, the second announced while the first's window is open but submitted after it ends: they
    share one segment (each segment costs CPU whatever its size), and both are acknowledged once it is
    durable."""
    first, second = (decode_protobuf(protobuf_body(finished_spans(3, seed=s))) for s in (1, 2))
    acknowledged = []
    done = threading.Event()

    def ack(error):
        acknowledged.append(error)
        if len(acknowledged) == 2:
            done.set()

    commit = GroupCommit(store, window=1.0)
    try:
        commit.submit(first, ack)
        commit.expect()  # the second request's body is in; its decode takes longer than the window
        time.sleep(1.3)
        commit.submit(second, ack, expected=True)
        assert done.wait(10)
    finally:
        commit.close()
    assert (acknowledged, commit.segments_published) == ([None, None], 1)
    assert sql(store, "SELECT count(*) AS n FROM spans") == [{"n": 6}]
