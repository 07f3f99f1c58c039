"""`rollscope collect` over OTLP/gRPC, as the official gRPC exporter and a raw gRPC client see it: the same
spans, token, limits and durability as OTLP/HTTP, and the gRPC statuses that stand for HTTP's answers."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import grpc
import pytest
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from rollscope import queries
from rollscope.collectors.receiver import ReceiverConfig, running
from rollscope.store.layout import partition_dir
from tests.conftest import rollscope
from tests.fixtures.receiver import collect_process, finished_spans, get, post, protobuf_body, span_ids

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@contextmanager
def serving(store, **options):
    """A receiver in this process with gRPC on a free port; yields (HTTP base URL, gRPC port)."""
    options.setdefault("commit_window", 0.005)
    config = ReceiverConfig(store=store, port=0, grpc_port=0, **options)
    with running(config) as url:
        yield url, config.grpc_port


def call(port: int, body: bytes, metadata=(), compression=None, timeout=30):
    """One raw Export call; returns (code, response bytes or details, trailing metadata as a dict)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(EXPORT)
        try:
            response, info = export.with_call(
                body, metadata=metadata, compression=compression, timeout=timeout
            )
            return grpc.StatusCode.OK, response, dict(info.trailing_metadata() or ())
        except grpc.RpcError as e:
            return e.code(), e.details(), dict(e.trailing_metadata() or ())


def stored(store) -> list[int]:
    return [row[0] for row in queries.connect(store).execute("SELECT span_id FROM spans").fetchall()]


def test_official_grpc_exporter_delivers_every_span_gzip_and_plain(store):
    sent = set()
    with serving(store, token="s3cret") as (_, port):
        for compression in (grpc.Compression.Gzip, grpc.Compression.NoCompression):
            provider = TracerProvider(resource=Resource({"rl.run.id": "exp-7", "service.name": "worker"}))
            exporter = OTLPSpanExporter(
                endpoint=f"127.0.0.1:{port}",
                insecure=True,
                compression=compression,
                headers={"authorization": "Bearer s3cret"},
            )
            provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128))
            tracer = provider.get_tracer("job")
            for i in range(300):
                attributes = {
                    "rl.rollout.id": f"r{i // 3}",
                    "rl.turn.index": i % 3,
                    "gen_ai.usage.input_tokens": 1000 + i,
                    "gen_ai.latency.time_in_model_prefill": 0.25,
                    "team.tags": ("a", "b"),
                }
                with tracer.start_as_current_span("rl.turn", attributes=attributes) as span:
                    sent.add(span.get_span_context().span_id)
            provider.shutdown()
    code, out, err = rollscope(
        "sql",
        "--store",
        store,
        "--format",
        "csv",
        "SELECT count(*), count(DISTINCT span_id), sum(input_tokens)::BIGINT, min(prefill_time_s), "
        "any_value(attributes->>'$.\"team.tags\"') FROM turns",
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == f'600,600,{2 * sum(1000 + i for i in range(300))},0.25,"[""a"",""b""]"'
    assert set(stored(store)) == sent


def test_the_same_spans_by_grpc_and_http_make_the_same_rows(tmp_path):
    spans = finished_spans(40, seed=3)
    body = protobuf_body(spans)
    with serving(tmp_path / "http") as (url, _):
        assert post(url, body).status == 200
    with serving(tmp_path / "grpc") as (_, port):
        code, response, _ = call(port, body)
    assert code == grpc.StatusCode.OK and ExportTraceServiceResponse.FromString(response) == (
        ExportTraceServiceResponse()
    )
    rows = [
        queries.connect(tmp_path / store)
        .execute("SELECT * EXCLUDE (instance_id) FROM turns ORDER BY span_id")
        .fetchall()
        for store in ("http", "grpc")
    ]
    assert len(rows[0]) == 40 and rows[0] == rows[1]


def test_token_malformed_and_partial_success_answers(store):
    spans = finished_spans(3)
    good = protobuf_body(spans)
    anonymous = protobuf_body(finished_spans(4, run_id=None, seed=1))
    auth = (("authorization", "Bearer s3cret"),)
    with serving(store, token="s3cret") as (url, port):
        missing = call(port, good)
        wrong = call(port, good, (("authorization", "Bearer nope"),))
        junk = call(port, b"\xff\xff\xff", auth)
        partial = call(port, anonymous, auth)
        right = call(port, good, auth)
        health = get(url, "/health", {"Authorization": "Bearer s3cret"}).json()
    assert missing[0] == wrong[0] == grpc.StatusCode.UNAUTHENTICATED
    assert "Bearer" in missing[1]
    assert junk[0] == grpc.StatusCode.INVALID_ARGUMENT and "not a protobuf" in junk[1]
    assert partial[0] == grpc.StatusCode.OK
    rejected = ExportTraceServiceResponse.FromString(partial[1]).partial_success
    assert rejected.rejected_spans == 4 and "without rl.run.id" in rejected.error_message
    assert right[0] == grpc.StatusCode.OK
    for answer in (missing, wrong, junk):  # nothing to retry: no retry info
        assert "google.rpc.retryinfo-bin" not in answer[2]
    assert sorted(stored(store)) == sorted(span_ids(spans))
    assert health["requests"] == {"200": 2, "400": 1, "401": 2}


def test_over_the_size_limit_even_when_gzip_hides_it(store):
    big = protobuf_body(finished_spans(400))  # highly compressible
    with serving(store, max_request_bytes=len(big) // 2, max_pending_bytes=len(big) // 2) as (url, port):
        plain = call(port, big)
        zipped = call(port, big, compression=grpc.Compression.Gzip)
        small = call(port, protobuf_body(finished_spans(5)), compression=grpc.Compression.Gzip)
        assert get(url, "/health").status == 200
    assert plain[0] == zipped[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "google.rpc.retryinfo-bin" not in zipped[2]  # too large stays too large: no retry
    assert small[0] == grpc.StatusCode.OK
    assert len(stored(store)) == 5


def _retry_delay(trailers: dict) -> tuple[float, float]:
    """The delay in both places clients look: OTLP exporters' retryinfo-bin and grpc-status-details-bin."""
    info = RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    status = Status.FromString(trailers["grpc-status-details-bin"])
    (detail,) = status.details
    assert detail.Is(RetryInfo.DESCRIPTOR)
    unpacked = RetryInfo()
    detail.Unpack(unpacked)
    return info.retry_delay.seconds, unpacked.retry_delay.seconds


@pytest.mark.long  # overload by design
def test_over_the_memory_budget_the_grpc_client_is_told_to_retry_and_loses_nothing(store):
    """HTTP and gRPC share one budget: a request held until its commit fills it, the next one is answered
    RESOURCE_EXHAUSTED with RetryInfo, and the official exporter, retrying after it, delivers."""
    body = protobuf_body(finished_spans(50))
    with serving(store, max_request_bytes=len(body), max_pending_bytes=len(body), commit_window=1.0) as (
        url,
        port,
    ):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            held = channel.unary_unary(EXPORT).future(body, timeout=30)
            while get(url, "/health").json()["pending_bytes"] == 0:
                time.sleep(0.001)
            refused = call(port, body)
            assert held.result() == b""
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=20)
        blocker = channel_future(port, body)
        while get(url, "/health").json()["pending_bytes"] == 0:
            time.sleep(0.001)
        started = time.monotonic()
        result = exporter.export(finished_spans(50, seed=9))
        waited = time.monotonic() - started
        blocker()
    assert refused[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _retry_delay(refused[2]) == (1, 1)
    assert result == SpanExportResult.SUCCESS and waited >= 0.9  # retried after the delay it was given
    assert len(stored(store)) == 150 and len(set(stored(store))) == 100


def channel_future(port: int, body: bytes):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    future = channel.unary_unary(EXPORT).future(body, timeout=30)

    def finish():
        assert future.result() == b""
        channel.close()

    return finish


def test_store_unwritable_is_unavailable_with_retry_info(store):
    blocked = partition_dir(store, "spans", "exp-7")
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the run's folder should be")
    with serving(store) as (_, port):
        answer = call(port, protobuf_body(finished_spans(3)))
    assert answer[0] == grpc.StatusCode.UNAVAILABLE and "not writable" in answer[1]
    assert _retry_delay(answer[2]) == (5, 5)


@pytest.mark.long  # kill -9 under load
def test_kill_9_during_grpc_load_loses_no_acknowledged_span(store):
    batches = [finished_spans(20, seed=seed) for seed in range(200)]
    sent, acknowledged = set(), set()
    lock = threading.Lock()

    def client(mine: list) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(EXPORT)
            for spans in mine:
                with lock:
                    sent.update(span_ids(spans))
                try:
                    export(protobuf_body(spans), timeout=10)
                except grpc.RpcError:
                    return  # the receiver is gone: this batch was never acknowledged
                with lock:
                    acknowledged.update(span_ids(spans))

    with collect_process(store) as (proc, _):
        port = _grpc_port(proc)
        threads = [threading.Thread(target=client, args=(batches[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        while len(acknowledged) < 600:
            time.sleep(0.005)
        proc.kill()  # SIGKILL, mid-load
        for t in threads:
            t.join()
    assert 600 <= len(acknowledged) < len(sent) <= 4000  # killed with calls still in flight
    ids = stored(store)
    assert acknowledged <= set(ids) <= sent
    assert len(ids) == len(set(ids))


def _grpc_port(proc) -> int:
    return int(proc.rollscope_line.split(" and ")[1].split(" ")[0].rsplit(":", 1)[1])


def test_grpc_off_and_a_taken_port_get_clear_answers(store, tmp_path, capfd):
    with collect_process(store, "--grpc-port", "off") as (proc, url):
        assert " and " not in proc.rollscope_line and get(url, "/health").status == 200
    with collect_process(store) as (proc, _):
        taken = _grpc_port(proc)
        capfd.readouterr()
        code, out, err = rollscope(
            "collect", "--store", tmp_path / "other", "--port", "0", "--grpc-port", str(taken)
        )
        core_log = capfd.readouterr().err  # what gRPC's C core writes to the terminal itself
    assert code == 1 and err.startswith("rollscope: Cannot listen:") and "--grpc-port off" in err
    assert len(err.strip().splitlines()) == 1 and core_log == ""
