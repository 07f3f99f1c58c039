"""vLLM / SGLang helpers end to end: a job's turn sends its traceparent to an OpenAI-compatible engine on
loopback; the engine (standing in for vLLM or SGLang: their documented span attributes and response shapes)
exports its request span with the official OTLP exporter to `rollscope collect`; the turns view shows one turn
per generation, filled with the engine's prefill/decode time and cached tokens, and the spec counts read from
the response."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rollscope import queries
from rollscope.collectors.receiver import ReceiverConfig, running
from rollscope.integrations.engines import (
    cache_attributes,
    record_cache,
    record_spec,
    spec_attributes,
    traceparent_headers,
)
from rollscope.queries import trace
from tests.conftest import sql_json

# vLLM's response with --per-request-spec-decode-metrics (the shape vLLM documents for `metrics`)
VLLM_SPEC = {
    "mean_acceptance_length": 1.23,
    "draft_acceptance_rate": 0.0775,
    "acceptance_histogram": [39, 1, 0, 3],
    "num_spec_steps": 43,
    "num_accepted_draft_tokens": 10,
    "num_draft_tokens": 129,
    "num_spec_tokens": 3,
}
# SGLang's native /generate answer: meta_info with the speculative counters
SGLANG_META = {
    "prompt_tokens": 900,
    "completion_tokens": 60,
    "cached_tokens": 700,
    "spec_verify_ct": 20,
    "spec_accept_token_num": 40,
    "spec_draft_token_num": 80,
    "spec_accept_rate": 0.5,
    "e2e_latency": 0.4,
}


class _Engine(BaseHTTPRequestHandler):
    """An OpenAI-compatible engine: continues the caller's trace from `traceparent`, as vLLM and SGLang do."""

    kind = "vllm"
    tracer = None

    def do_POST(self):  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parent = TraceContextTextMapPropagator().extract({"traceparent": self.headers.get("traceparent", "")})
        prompt = 800 + 10 * request["turn"]
        if self.kind == "vllm":
            attributes = {
                "gen_ai.usage.prompt_tokens": prompt,
                "gen_ai.usage.completion_tokens": 50,
                "gen_ai.usage.cached_tokens": prompt - 100,
                "gen_ai.latency.time_in_model_prefill": 0.125,
                "gen_ai.latency.time_in_model_decode": 1.5,
                "gen_ai.latency.time_to_first_token": 0.25,
                "gen_ai.request.id": f"cmpl-{request['turn']}",
            }
            name = "llm_request"
            body = {
                "id": f"cmpl-{request['turn']}",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 50, "total_tokens": prompt + 50},
                "metrics": {"speculative_decoding": VLLM_SPEC},
            }
        else:
            attributes = {
                "gen_ai.latency.time_in_model_prefill": 0.0625,
                "gen_ai.latency.time_in_model_decode": 0.75,
                "gen_ai.usage.cached_tokens": 700,
            }
            name = "sglang.request"  # any name: a child of the turn with engine timings fills the turn
            body = {"text": "ok", "meta_info": SGLANG_META}
        with self.tracer.start_as_current_span(name, context=parent, attributes=attributes):
            pass
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextmanager
def engine(kind: str, exporter):
    provider = TracerProvider(resource=Resource({"service.name": kind, "rl.compute.role": "rollout"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = type("Engine", (_Engine,), {"kind": kind, "tracer": provider.get_tracer(kind)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        provider.shutdown()


def chat(url: str, turn: int, headers: dict) -> bytes:
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps({"model": "policy", "turn": turn}).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_engine_request_spans_nest_under_the_turn_and_fill_it(store, attached, kind):
    config = ReceiverConfig(store=store, port=0, grpc_port=0, commit_window=0.005, run_id="exp-7")
    with running(config) as url:
        # vLLM exports over gRPC by default; SGLang here over OTLP/HTTP: both official exporters
        exporter = (
            GrpcExporter(endpoint=f"127.0.0.1:{config.grpc_port}", insecure=True)
            if kind == "vllm"
            else HttpExporter(endpoint=f"{url}/v1/traces")
        )
        rl = attached()
        with engine(kind, exporter) as engine_url, rl.rollout("r1", task_id="t1") as rollout:
            for i in range(3):
                with rl.turn(i, input_tokens=800 + 10 * i, output_tokens=50) as turn:
                    headers = traceparent_headers({"Authorization": "Bearer x"})
                    assert headers["Authorization"] == "Bearer x"
                    answer = chat(engine_url, i, headers)
                    recorded = record_spec(turn, answer)
            rollout.set(reward=1.0)
        rl.force_flush()

    turns = sql_json(
        store,
        "SELECT rollout_id, turn_index, name, input_tokens, cached_input_tokens, new_input_tokens, "
        "prefill_time_s, decode_time_s, ttft_s, spec_draft_tokens, spec_accepted_tokens, spec_verify_steps, "
        "spec_k, response_id FROM turns ORDER BY turn_index",
    )
    engine_spans = sql_json(
        store,
        "SELECT count(*) AS n, count(DISTINCT parent_span_id) AS parents FROM spans WHERE name <> "
        "'rl.turn' AND name <> 'rl.rollout'",
    )
    assert engine_spans == [{"n": 3, "parents": 3}]  # the engine's spans arrived, one under each turn
    assert [t["name"] for t in turns] == ["rl.turn"] * 3  # ... and are not turns of their own
    for i, t in enumerate(turns):
        assert (t["rollout_id"], t["turn_index"], t["input_tokens"]) == ("r1", i, 800 + 10 * i)
        if kind == "vllm":
            assert (t["cached_input_tokens"], t["new_input_tokens"]) == (700 + 10 * i, 100)
            assert (t["prefill_time_s"], t["decode_time_s"], t["ttft_s"]) == (0.125, 1.5, 0.25)
            assert (
                t["spec_draft_tokens"],
                t["spec_accepted_tokens"],
                t["spec_verify_steps"],
                t["spec_k"],
            ) == (
                129,
                10,
                43,
                3,
            )
            assert t["response_id"] == f"cmpl-{i}"
        else:
            assert (t["cached_input_tokens"], t["prefill_time_s"], t["decode_time_s"]) == (700, 0.0625, 0.75)
            assert (
                t["spec_draft_tokens"],
                t["spec_accepted_tokens"],
                t["spec_verify_steps"],
                t["spec_k"],
            ) == (
                80,
                40,
                20,
                None,
            )
    assert recorded  # what record_spec set is what it returned
    waterfall = trace.spans(queries.connect(store), "exp-7", "r1")  # the Rollouts page's waterfall
    assert sorted(waterfall.kind) == ["other"] * 3 + ["rollout"] + ["turn"] * 3
    assert set(waterfall[waterfall.kind == "other"].name) == {
        "llm_request" if kind == "vllm" else "sglang.request"
    }


def test_spec_attributes_read_every_documented_shape_and_nothing_else():
    vllm = {"choices": [], "metrics": {"speculative_decoding": VLLM_SPEC}}
    expected = {
        "rl.spec.draft_tokens": 129,
        "rl.spec.accepted_tokens": 10,
        "rl.spec.verify_steps": 43,
        "rl.spec.num_speculative_tokens": 3,
    }
    assert spec_attributes(vllm) == expected
    assert spec_attributes(json.dumps(vllm)) == expected  # the JSON text, e.g. a stream's last chunk
    assert spec_attributes({"text": "x", "meta_info": SGLANG_META}) == {
        "rl.spec.draft_tokens": 80,
        "rl.spec.accepted_tokens": 40,
        "rl.spec.verify_steps": 20,
    }
    # SGLang leaves the counters out when no round was speculated; vLLM without the opt-in has no metrics
    assert spec_attributes({"meta_info": {"prompt_tokens": 3}}) == {}
    assert spec_attributes({"choices": [], "usage": {}}) == {}
    for junk in (None, b"not json", "[1, 2]", {"metrics": "x"}, {"meta_info": {"spec_verify_ct": -1}}):
        assert spec_attributes(junk) == {}  # never raises into the job


def test_cache_attributes_read_vllms_and_sglangs_cached_counts_and_nothing_else(attached, store):
    cached = {"gen_ai.usage.cache_read.input_tokens": 1024}
    # vLLM's (and SGLang's) OpenAI-compatible usage, with --enable-prompt-tokens-details
    openai = {
        "choices": [],
        "usage": {"prompt_tokens": 1500, "prompt_tokens_details": {"cached_tokens": 1024}},
    }
    assert cache_attributes(openai) == cache_attributes(json.dumps(openai)) == cached
    assert (
        cache_attributes({"text": "x", "meta_info": {"prompt_tokens": 1500, "cached_tokens": 1024}}) == cached
    )
    assert cache_attributes({"usage": {"prompt_tokens": 3, "prompt_tokens_details": None}}) == {}
    for junk in (None, "[1]", {"meta_info": {"cached_tokens": -1}}, {"usage": "x"}):
        assert cache_attributes(junk) == {}  # never raises into the job
    rl = attached()
    with rl.rollout("r-cache"), rl.turn(1, input_tokens=1500, context_tokens=1400) as turn:
        assert record_cache(turn, openai) == cached
    rl.force_flush()
    row = (
        queries.connect(store)
        .execute("SELECT cached_input_tokens FROM turns WHERE rollout_id = 'r-cache'")
        .fetchone()
    )
    assert row == (1024,)


def test_a_response_that_is_not_json_is_one_warning_line(caplog):
    with caplog.at_level(logging.WARNING, logger="rollscope"):
        assert spec_attributes('{"choices": [{"text": "trunc') == {}
    (record,) = caplog.records
    assert record.exc_info is None and "not JSON" in record.getMessage()


def test_traceparent_is_the_current_turn_and_absent_outside_any_span(attached):
    assert traceparent_headers({"a": "b"}) == {"a": "b"}
    rl = attached()
    with rl.rollout("r1"), rl.turn(0) as turn:
        headers = traceparent_headers()
        context = turn.span.get_span_context()
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, int(trace_id, 16), int(span_id, 16)) == ("00", context.trace_id, context.span_id)
    assert int(flags, 16) & 1  # sampled: the engine records its span


def test_engine_spans_arriving_after_their_turns_fill_them_in_the_dashboards_reader(store, attached):
    """The dashboard's materialized reader refreshes incrementally; the engine's spans come later than the
    job's turns (another process, another exporter) and still fill those turns, not add turns."""
    from opentelemetry import trace as otel

    from rollscope.queries import Reader

    rl = attached()
    contexts = []
    with rl.rollout("r1", task_id="t1"):
        for i in range(2):
            with rl.turn(i, input_tokens=500) as turn:
                contexts.append(otel.set_span_in_context(turn.span))
    rl.force_flush()
    reader = Reader(store, materialize=True)
    count = "SELECT count(*) AS n, count(prefill_time_s) AS filled, coalesce(sum(decode_time_s), 0) AS decode FROM turns"
    assert reader.sql(count).to_dict("records") == [{"n": 2, "filled": 0, "decode": 0.0}]

    config = ReceiverConfig(store=store, port=0, commit_window=0.005, run_id="exp-7")
    with running(config) as url:
        provider = TracerProvider(resource=Resource({"service.name": "vllm"}))
        provider.add_span_processor(SimpleSpanProcessor(HttpExporter(endpoint=f"{url}/v1/traces")))
        tracer = provider.get_tracer("vllm")
        for context in contexts:
            attributes = {
                "gen_ai.latency.time_in_model_prefill": 0.5,
                "gen_ai.latency.time_in_model_decode": 2.0,
            }
            with tracer.start_as_current_span("llm_request", context=context, attributes=attributes):
                pass
        provider.shutdown()
    reader.refresh()
    assert reader.sql(count).to_dict("records") == [{"n": 2, "filled": 2, "decode": 4.0}]
