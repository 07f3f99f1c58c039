"""Transcripts: what a job's spans say is kept beside them, one row per message, under the capture policy.

Content comes in through the helpers (``rl.turn(input=..., output=...)``), plain OpenTelemetry spans with GenAI's
attributes or events, and OTLP from any SDK; it lands in the run's ``messages`` dataset, never in the spans.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.fixtures.otlp_json import encode_json
from rollscope import queries
from rollscope.collectors.content import ContentPolicy, group_kept
from rollscope.collectors.receiver import ReceiverConfig, running
from rollscope.store.layout import segments
from tests.conftest import rollscope, sql_json
from tests.fixtures.receiver import JSON, PROTOBUF, post

CONVERSATION = """
    SELECT span_name, turn_index, source, role, content, reasoning, tool_calls, tool_name, tool_call_id,
           finish_reason, tokens, truncated
    FROM messages ORDER BY start_ns, span_id, ordinal
"""


def _coding_rollout(rl, rollout_id="r1", group_id="g1", status="ok", reward=1.0):
    """A coding agent's rollout as a job records it with the helpers."""
    with rl.rollout(rollout_id, task_id="t1", group_id=group_id, environment="swe") as rollout:
        with rl.turn(0, system="You are a coding agent.", input="Fix the failing test in calc.py") as turn:
            turn.set(
                output={
                    "role": "assistant",
                    "parts": [
                        {"type": "reasoning", "content": "Run the tests first."},
                        {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"cmd": "pytest"}},
                    ],
                    "finish_reason": "tool_calls",
                },
                output_tokens=24,
            )
        with rl.tool("bash", tool_call_id="c1", arguments={"cmd": "pytest"}) as tool:
            tool.set(result="FAILED test_calc.py::test_add - assert 3 == 4", observation_tokens=19)
        with rl.turn(1, system="You are a coding agent.", input=[{"role": "tool", "tool_call_id": "c1",
                     "content": "FAILED test_calc.py::test_add"}], output="Fixed: add returns a + b.",
                     output_tokens=9):  # fmt: skip
            pass
        with rl.judge(prompt="Is the fix right?", rationale="Yes: the test passes now.", reward=1.0):
            pass
        rollout.set(rollout_status=status, reward=reward)


def test_a_rollout_recorded_with_the_helpers_reads_back_as_its_conversation(attached, store):
    rl = attached()
    _coding_rollout(rl)
    rl.force_flush()

    rows = sql_json(store, CONVERSATION)
    assert [(r["span_name"], r["source"], r["role"]) for r in rows] == [
        ("rl.turn", "system", "system"),
        ("rl.turn", "input", "user"),
        ("rl.turn", "output", "assistant"),
        ("execute_tool bash", "tool_arguments", "assistant"),
        ("execute_tool bash", "tool_result", "tool"),
        # the second turn's system prompt is the first's: stored once
        ("rl.turn", "input", "tool"),
        ("rl.turn", "output", "assistant"),
        ("rl.judge", "input", "user"),
        ("rl.judge", "output", "assistant"),
    ]
    call = rows[2]
    assert (call["content"], call["reasoning"], call["finish_reason"], call["tokens"]) == (
        None,
        "Run the tests first.",
        "tool_calls",
        24,
    )
    assert json.loads(call["tool_calls"]) == [{"id": "c1", "name": "bash", "arguments": {"cmd": "pytest"}}]
    result = rows[4]
    assert (result["content"], result["tool_name"], result["tool_call_id"], result["tokens"]) == (
        "FAILED test_calc.py::test_add - assert 3 == 4",
        "bash",
        "c1",
        19,
    )
    assert rows[5]["tool_call_id"] == "c1" and rows[5]["turn_index"] == 1
    assert rows[8]["content"] == "Yes: the test passes now."
    assert {r["truncated"] for r in rows} == {False}


def test_content_never_lands_in_the_spans(attached, store):
    rl = attached()
    _coding_rollout(rl)
    rl.force_flush()
    spans = sql_json(store, "SELECT name, attributes, events FROM spans")
    assert len(spans) == 5
    assert all(s["attributes"] is None and s["events"] is None for s in spans)


def test_capture_off_writes_no_content_anywhere(attached, store):
    """Off means off: not through the helpers, not through a plain span's GenAI attributes or events."""
    rl = attached(capture_content=False)
    _coding_rollout(rl)
    with rl.tracer.start_as_current_span(
        "chat qwen", attributes={"gen_ai.input.messages": '[{"role":"user","content":"secret"}]'}
    ) as span:
        span.add_event("gen_ai.user.message", {"content": "secret too"})
    rl.force_flush()

    assert segments(store, "messages", "exp-7") == []
    on_disk = b"".join(p.read_bytes() for p in store.rglob("*.parquet"))
    for text in (b"calc.py", b"secret", b"Run the tests"):
        assert text not in on_disk
    assert sql_json(store, "SELECT count(*) AS n FROM messages") == [{"n": 0}]
    assert sql_json(store, "SELECT count(*) AS n FROM spans") == [{"n": 6}]


@pytest.mark.parametrize(
    ("ours", "genai", "captured"),
    [
        (None, None, True),  # the default: on
        (None, "false", False),
        (None, "NO_CONTENT", False),
        (None, "SPAN_ONLY", True),
        ("1", "false", True),  # ours first
        ("0", "true", False),
        ("maybe", "false", False),  # a bad value of ours is ignored (with a warning): theirs decides
    ],
)
def test_capture_switch_follows_rollscope_then_opentelemetry_genai(monkeypatch, ours, genai, captured):
    from rollscope.settings import Settings

    for name, value in (
        ("ROLLSCOPE_CAPTURE_CONTENT", ours),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", genai),
    ):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert Settings.resolve().capture_content is captured
    assert Settings.resolve(capture_content=not captured).capture_content is (not captured)  # argument wins


def test_a_huge_tool_output_is_capped_keeping_head_and_tail(attached, store):
    rl = attached(content_max_chars=4096)
    log = "".join(f"line {i}: ok\n" for i in range(80_000)) + "FAILED: the last line says why"
    with rl.rollout("r1"), rl.tool("bash", result=log):
        pass
    rl.force_flush()
    (row,) = sql_json(store, "SELECT content, content_chars, truncated FROM messages")
    assert (row["content_chars"], row["truncated"]) == (len(log), True)
    assert len(row["content"]) <= 4096
    assert row["content"].startswith("line 0: ok\nline 1: ok")
    assert row["content"].endswith("FAILED: the last line says why")
    assert f"of {len(log):,} characters cut by rollscope" in row["content"]


def _chat_trace(tracer, turns: int):
    """A plain GenAI chat agent: every call re-sends the whole conversation, as OpenAI-style clients do."""
    history = [{"role": "user", "content": "What is 6 * 7?"}]
    with tracer.start_as_current_span("invoke_agent"):
        for i in range(turns):
            reply = {"role": "assistant", "content": f"step {i}"}
            with tracer.start_as_current_span(
                "chat qwen",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system_instructions": "Be brief.",
                    "gen_ai.input.messages": json.dumps(history),
                    "gen_ai.output.messages": json.dumps([reply]),
                },
            ):
                pass
            history += [reply, {"role": "user", "content": f"and then {i}?"}]


def test_a_chat_span_that_resends_its_history_is_stored_from_its_first_new_message(attached, store):
    rl = attached()
    _chat_trace(rl.tracer, turns=5)
    rl.force_flush()
    rows = sql_json(store, "SELECT source, message_index, content FROM messages ORDER BY start_ns, ordinal")
    # 1 system + 1 first question + 5 replies + 4 follow-ups: storage grows with the transcript, not its square
    assert len(rows) == 11
    assert [r["content"] for r in rows[:4]] == ["Be brief.", "What is 6 * 7?", "step 0", "and then 0?"]
    assert [r["message_index"] for r in rows if r["source"] == "input"] == [0, 2, 4, 6, 8]


def test_sampling_keeps_whole_groups_and_every_failed_rollout(attached, store):
    rl = attached(content_sample=0.5)
    statuses = {}
    for g in range(24):
        for m in range(4):
            rollout_id = f"g{g}-{m}"
            statuses[rollout_id] = "infra_error" if m == 3 and g % 4 == 0 else "ok"
            with rl.rollout(rollout_id, group_id=f"g{g}", task_id=f"t{g}") as rollout:
                with rl.turn(0, input=f"task {g}", output=f"attempt {m}"):
                    pass
                rollout.set(rollout_status=statuses[rollout_id], reward=float(m % 2))
    rl.force_flush()

    kept = {r["rollout_id"] for r in sql_json(store, "SELECT DISTINCT rollout_id FROM messages")}
    in_sample = {f"g{g}" for g in range(24) if group_kept("exp-7", f"g{g}", 0.5)}
    assert 4 <= len(in_sample) <= 20  # the hash splits groups about evenly
    expected = {r for r, status in statuses.items() if r.split("-")[0] in in_sample or status != "ok"}
    assert kept == expected
    (stats,) = sql_json(store, "SELECT messages_exported, messages_sampled_out FROM collector_stats")
    assert stats == {"messages_exported": 2 * len(kept), "messages_sampled_out": 2 * (96 - len(kept))}


def _sdk_spans_with_content() -> list:
    """GenAI content as SDKs send it: current attributes, the older events and the older indexed names."""
    keep = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"rl.run.id": "exp-7", "service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("sdk")
    with tracer.start_as_current_span("chat a", attributes={"rl.rollout.id": "r1", "rl.turn.index": 0}) as s:
        s.set_attributes(
            {
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "hello"}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
            }
        )
    with tracer.start_as_current_span("chat b", attributes={"rl.rollout.id": "r2"}) as s:
        s.add_event("gen_ai.user.message", {"content": "what is 2+2?"})
        s.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": '{"content": "4"}'})
        s.add_event("retry", {"attempt": 2})
    with tracer.start_as_current_span(
        "chat c",
        attributes={
            "rl.rollout.id": "r3",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "terse",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "ping",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "pong",
        },
    ):
        pass
    return list(keep.get_finished_spans())


EXPECTED_SDK_MESSAGES = [
    ("r1", "input", "user", "hi", None),
    ("r1", "output", "assistant", "hello", "stop"),
    ("r2", "input", "user", "what is 2+2?", None),
    ("r2", "output", "assistant", "4", "stop"),
    ("r3", "input", "system", "terse", None),
    ("r3", "input", "user", "ping", None),
    ("r3", "output", "assistant", "pong", None),
]


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_receiver_maps_genai_content_from_any_sdk(store, encoding):
    request = encode_spans(_sdk_spans_with_content())
    body, kind = (
        (request.SerializeToString(), PROTOBUF) if encoding == "protobuf" else (encode_json(request), JSON)
    )
    with running(ReceiverConfig(store=store, port=0, commit_window=0.001)) as url:
        assert post(url, body, kind).status == 200
    rows = sql_json(
        store,
        "SELECT rollout_id, source, role, content, finish_reason FROM messages ORDER BY rollout_id, ordinal",
    )
    assert [tuple(r.values()) for r in rows] == EXPECTED_SDK_MESSAGES
    spans = sql_json(store, "SELECT name, attributes, events FROM spans ORDER BY name")
    assert [s["attributes"] for s in spans] == [None, None, None]
    assert [json.loads(e)[0]["name"] if e else None for e in (s["events"] for s in spans)] == [
        None,
        "retry",
        None,
    ]


def test_the_exporter_reads_the_same_content_as_the_receiver(store):
    from rollscope.collectors.exporter import StoreSpanExporter

    exporter = StoreSpanExporter(store)
    exporter.export(_sdk_spans_with_content())
    exporter.shutdown()
    rows = sql_json(
        store,
        "SELECT rollout_id, source, role, content, finish_reason FROM messages ORDER BY rollout_id, ordinal",
    )
    assert [tuple(r.values()) for r in rows] == EXPECTED_SDK_MESSAGES


def test_a_receiver_started_without_content_keeps_none(store):
    request = encode_spans(_sdk_spans_with_content())
    config = ReceiverConfig(store=store, port=0, commit_window=0.001, content=ContentPolicy(enabled=False))
    with running(config) as url:
        assert post(url, request.SerializeToString(), PROTOBUF).status == 200
    assert segments(store, "messages", "exp-7") == []
    assert sql_json(store, "SELECT count(*) AS n FROM spans") == [{"n": 3}]


def test_transcripts_are_compacted_searched_and_removed_with_their_run(attached, store):
    rl = attached()
    for i in range(6):
        _coding_rollout(rl, rollout_id=f"r{i}", group_id=f"g{i // 2}")
        rl.force_flush()  # a segment each
    assert len(segments(store, "messages", "exp-7")) == 6

    assert rollscope("compact", "--store", store)[0] == 0
    assert len(segments(store, "messages", "exp-7")) == 1
    assert sql_json(store, "SELECT count(*) AS n, count(DISTINCT rollout_id) AS r FROM messages") == [
        {"n": 6 * 9, "r": 6}
    ]
    found = sql_json(
        store,
        "SELECT DISTINCT rollout_id FROM messages WHERE regexp_matches(content, 'FAILED .*test_add') "
        "ORDER BY rollout_id",
    )
    assert [r["rollout_id"] for r in found] == [f"r{i}" for i in range(6)]

    assert rollscope("rm", "--store", store, "--run", "exp-7")[0] == 0
    assert not (store / "messages" / "run_id=exp-7").exists()


def test_the_sql_explorer_reads_transcripts_and_nothing_outside_the_store(attached, store, tmp_path):
    from rollscope.errors import QueryError
    from rollscope.queries.sandbox import Sandbox

    rl = attached()
    _coding_rollout(rl)
    rl.force_flush()
    sandbox = Sandbox(store)
    result = sandbox.query("SELECT role, content FROM messages WHERE source = 'tool_result'")
    assert result.frame.to_dict("records") == [
        {"role": "tool", "content": "FAILED test_calc.py::test_add - assert 3 == 4"}
    ]
    outside = tmp_path / "elsewhere.parquet"
    queries.connect(store).execute(f"COPY (SELECT 1 AS x) TO '{outside}' (FORMAT parquet)")
    with pytest.raises(QueryError):
        sandbox.query(f"SELECT * FROM read_parquet('{outside}')")
