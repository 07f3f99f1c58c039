"""A span means the same thing whichever way it came in: in-process exporter, OTLP protobuf or OTLP/JSON.
vLLM's own request spans and GenAI chat spans land in the turn columns the analyses read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from benchmarks.fixtures.otlp_json import encode_json
from rollscope import queries
from rollscope.collectors.exporter import StoreSpanExporter
from rollscope.collectors.receiver import ReceiverConfig, running
from rollscope.queries.analyses import prefill_decode
from tests.fixtures.receiver import JSON, PROTOBUF, post

FIXTURES = Path(__file__).parent / "fixtures"


def _job_spans() -> list:
    """One rollout's worth of spans exercising the mapping's corners: aliases, wrong types, arrays, events."""
    keep = InMemorySpanExporter()
    resource = Resource(
        {
            "rl.run.id": "exp-7",
            "service.name": "w",
            "rl.compute.devices": 8,
            "rl.model.parameters": 8_000_000_000,
            "host.name": "node-3",
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("job", "1.0")
    rollout = {
        "rl.rollout.id": "r1",
        "rl.task.id": "t1",
        "rl.group.id": "g1",
        "rl.environment.name": "swe",
        "rl.policy.version": 3,
    }
    with tracer.start_as_current_span("rl.rollout", attributes=rollout) as span:
        turns = [
            {
                "gen_ai.usage.input_tokens": 3000,
                "gen_ai.usage.cache_read.input_tokens": 2800,
                "rl.turn.index": 0,
            },
            {"gen_ai.usage.prompt_tokens": 3400, "gen_ai.usage.completion_tokens": 120, "rl.turn.index": 1},
            {"gen_ai.usage.prompt_tokens": 1, "gen_ai.usage.input_tokens": 2, "rl.turn.index": 2},
            {"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "many", "rl.turn.index": 3.0},
            {
                "rl.turn.index": 4,
                "gen_ai.latency.time_in_model_decode": 2,
                "x.flags": (True, False),
                "x.n": 1.5,
            },
        ]
        for attributes in turns:
            with tracer.start_as_current_span(
                "rl.turn", attributes={"rl.rollout.id": "r1", **attributes}
            ) as turn:
                turn.add_event("retry", {"attempt": 2, "why": "timeout"})
        with tracer.start_as_current_span("execute_tool bash", kind=SpanKind.CLIENT) as tool:
            tool.set_attributes({"gen_ai.tool.name": "bash", "rl.tool.exit_code": 1, "rl.rollout.id": "r1"})
            tool.set_status(Status(StatusCode.ERROR, "exit 1"))
        with tracer.start_as_current_span("chat qwen", kind=SpanKind.SERVER) as chat:
            chat.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 900,
                    "gen_ai.usage.output_tokens": 30,
                    "gen_ai.response.id": "resp-1",
                }
            )
        span.set_attributes({"rl.rollout.status": "ok", "rl.reward.score": 1})
    return list(keep.get_finished_spans())


def _rows(store: Path) -> list[dict]:
    con = queries.connect(store)
    cursor = con.execute("SELECT * EXCLUDE (start_time, end_time) FROM spans ORDER BY span_id")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        for column in ("attributes", "resource_attributes", "events"):
            row[column] = json.loads(row[column]) if row[column] is not None else None
    return rows


def test_exporter_protobuf_and_json_give_identical_rows(tmp_path):
    spans = _job_spans()
    exporter = StoreSpanExporter(tmp_path / "exporter")
    exporter.export(spans)
    exporter.shutdown()
    request = encode_spans(spans)
    for name, body, content_type in (
        ("protobuf", request.SerializeToString(), PROTOBUF),
        ("json", encode_json(request), JSON),
    ):
        with running(ReceiverConfig(store=tmp_path / name, port=0, commit_window=0.001)) as url:
            assert post(url, body, content_type).status == 200

    expected = _rows(tmp_path / "exporter")
    assert len(expected) == len(spans) == 8
    assert _rows(tmp_path / "protobuf") == expected
    assert _rows(tmp_path / "json") == expected
    by_index = {r["turn_index"]: r for r in expected if r["name"] == "rl.turn"}
    assert (by_index[1]["input_tokens"], by_index[1]["output_tokens"]) == (3400, 120)  # vLLM's old names
    assert (by_index[2]["input_tokens"], by_index[2]["attributes"]) == (2, {"gen_ai.usage.prompt_tokens": 1})
    assert (by_index[3]["input_tokens"], by_index[3]["attributes"]) == (
        12,
        {"gen_ai.usage.output_tokens": "many"},
    )
    assert by_index[4]["attributes"] == {"x.flags": [True, False], "x.n": 1.5}


@pytest.fixture
def vllm_store(store):
    """The fixture sent as vLLM and the RL job would: one OTLP/JSON request, vLLM's resource naming no run."""
    with running(ReceiverConfig(store=store, port=0, run_id="exp-7", commit_window=0.001)) as url:
        answer = post(url, (FIXTURES / "vllm_llm_request.otlp.json").read_bytes(), JSON)
    assert (answer.status, answer.json()) == (200, {})
    return store


def test_vllm_request_spans_are_turns_of_the_rollout_whose_trace_they_are_in(vllm_store):
    con = queries.connect(vllm_store)
    turns = con.execute(
        "SELECT rollout_id, environment, input_tokens, output_tokens, prefill_time_s, decode_time_s, ttft_s,"
        " service_name, response_id FROM turns ORDER BY start_ns"
    ).fetchall()
    assert turns == [
        ("r-1", "swe", 3000, 150, 0.18, 2.3, 0.2, "vllm", "cmpl-1f0c"),
        ("r-1", "swe", 3400, 120, 0.05, 1.9, 0.07, "vllm", "cmpl-2a7e"),
        ("r-1", "swe", 3900, 200, 0.06, 3.1, 0.08, "vllm", "cmpl-3c9d"),
    ]


def test_vllm_fixture_shows_up_in_the_prefill_decode_analysis(vllm_store):
    frame = prefill_decode(queries.connect(vllm_store), "exp-7", by="environment")
    row = frame.to_dict("records")[0]
    assert (row["environment"], row["turns"], row["new_prefill_tokens"], row["decode_tokens"]) == (
        "swe",
        3,
        10300,
        470,
    )
    assert row["prefill_decode_ratio"] == pytest.approx(10300 / 470)
    assert (row["prefill_time_s"], row["decode_time_s"]) == (pytest.approx(0.29), pytest.approx(7.3))
