"""A job attaches collectors, emits spans, and reads the figures back with `rollscope sql`."""

from __future__ import annotations

import json
import os

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from rollscope.collectors.exporter import StoreSpanExporter
from tests.conftest import rollscope, spans_on_disk, sql_json


def test_helpers_and_plain_spans_read_back_through_rollscope_sql(attached, store):
    rl = attached(role="rollout", devices=8, model_name="policy-8b", model_parameters=8_000_000_000)
    with rl.rollout("r1", task_id="t1", group_id="g1", environment="swe", policy_version=3) as rollout:
        with rl.turn(0, input_tokens=3000, cached_input_tokens=2800, output_tokens=150):
            pass
        with rl.tool("bash", sandbox_id="sb-1", tool_exit_code=1, observation_tokens=3000):
            pass
        rollout.set(reward=0.0, rollout_status="ok")
    # A plain OpenTelemetry span with the convention names counts just like a helper's.
    with rl.tracer.start_as_current_span(
        "rl.turn",
        attributes={
            "rl.rollout.id": "r1",
            "rl.turn.index": 1,
            "gen_ai.usage.input_tokens": 3400,
            "gen_ai.usage.cache_read.input_tokens": 3150,
            "gen_ai.usage.output_tokens": 120,
        },
    ):
        pass
    assert rl.force_flush()

    rows = sql_json(
        store,
        "SELECT environment, count(*) AS turns, sum(new_input_tokens) AS new_prefill, sum(output_tokens) AS decode"
        " FROM turns GROUP BY environment",
    )
    assert rows == [{"environment": "swe", "turns": 2, "new_prefill": 450, "decode": 270}]
    code, out, _ = rollscope(
        "sql",
        "--store",
        store,
        "--format",
        "csv",
        "SELECT rollout_id, rollout_status, reward, task_id FROM rollouts",
    )
    assert out.splitlines() == ["rollout_id,rollout_status,reward,task_id", "r1,ok,0.0,t1"]


def test_resource_describes_the_process(attached, store):
    rl = attached(
        role="judge",
        devices=2,
        model_name="judge-70b",
        model_parameters=70_000_000_000,
        service_name="judge-pool",
        algorithm="grpo",
        staleness_bound=2,
    )
    with rl.judge(input_tokens=900, output_tokens=40, judge_status="ok", reward=1.0):
        pass
    rl.force_flush()
    rows = sql_json(
        store,
        "SELECT role, devices, parameters, service_name, judge_status FROM judges",
    )
    row = rows[0]
    assert row == {
        "role": "judge",
        "devices": 2.0,
        "parameters": 70_000_000_000,
        "service_name": "judge-pool",
        "judge_status": "ok",
    }


def test_wrong_typed_attributes_are_coerced_or_kept_never_fatal(attached, store):
    rl = attached()
    with rl.tracer.start_as_current_span(
        "rl.turn",
        attributes={
            "rl.turn.index": "2",
            "gen_ai.usage.input_tokens": "lots",
            "rl.task.id": 17,
            "custom.flag": True,
        },
    ):
        pass
    assert rl.force_flush()
    row = sql_json(store, "SELECT turn_index, input_tokens, attributes FROM turns")[0]
    assert row["turn_index"] == 2
    assert row["input_tokens"] is None
    assert json.loads(row["attributes"]) == {"gen_ai.usage.input_tokens": "lots", "custom.flag": True}
    assert rl.stats["attributes_kept_untyped"] == 1


def test_exporter_failure_is_counted_never_raised(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store should be")
    exporter = StoreSpanExporter(blocker, default_run_id="exp-7", segment_seconds=0.001)
    provider = TracerProvider(resource=Resource.create({"rl.run.id": "exp-7"}))
    tracer = provider.get_tracer("t")
    spans = []
    for i in range(3):
        with tracer.start_as_current_span(f"s{i}") as span:
            spans.append(span)
    exporter.export(spans)  # buffered: the failure shows when the segment is published
    assert exporter.force_flush() is False
    assert exporter.stats.snapshot()["spans_failed"] == 3
    exporter.shutdown()
    exporter.shutdown()  # twice is safe
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert "could not publish" in caplog.text


def test_spans_without_a_run_are_refused_with_a_clear_error(store):
    from rollscope.collectors import attach

    with pytest.raises(ValueError, match="run id"):
        attach(store=store, set_global=False)
    with pytest.raises(ValueError, match="invalid run id"):
        attach(store=store, run_id="../etc", set_global=False)


def test_an_exception_inside_a_rollout_marks_it_infra_error(attached, store):
    """The job's exception propagates untouched; every span it left on the way out records it as the SDK's
    own spans do: status error with the exception's type and message, and an exception event."""
    rl = attached()
    with (
        pytest.raises(TimeoutError, match="sandbox died"),
        rl.rollout("r9", task_id="t", environment="math"),
        rl.tool("run_tests", sandbox_id="sb-1"),
    ):
        raise TimeoutError("sandbox died")
    rl.force_flush()
    assert sql_json(store, "SELECT rollout_status FROM rollouts") == [{"rollout_status": "infra_error"}]
    spans = sql_json(
        store,
        "SELECT name, status_code, status_message, events::VARCHAR LIKE '%exception.type%TimeoutError%' AS event "
        "FROM spans ORDER BY name",
    )
    assert spans == [
        {"name": name, "status_code": "error", "status_message": "TimeoutError: sandbox died", "event": True}
        for name in ("execute_tool run_tests", "rl.rollout")
    ]


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_tight_loop_of_100k_spans_loses_nothing_silently(attached, store):
    rl = attached()
    tracer = rl.tracer
    for i in range(100_000):
        with tracer.start_as_current_span("rl.turn", attributes={"rl.turn.index": i}):
            pass
    rl.shutdown()
    rows = sql_json(
        store,
        "SELECT (SELECT count(*) FROM turns) AS stored,"
        " (SELECT sum(spans_dropped) FROM collector_stats) AS dropped",
    )
    figures = rows[0]
    assert figures["stored"] + figures["dropped"] == 100_000
    assert figures["stored"] > 0


def test_attach_joins_the_jobs_own_tracer_provider(store):
    from rollscope.collectors import attach

    provider = TracerProvider(resource=Resource.create({"service.name": "my-trainer"}))
    rl = attach(store=store, run_id="exp-8", role="train", devices=4, tracer_provider=provider)
    job_tracer = provider.get_tracer("the-job")
    with job_tracer.start_as_current_span(
        "rl.train_step", attributes={"rl.train.step": 0, "rl.train.tokens": 512}
    ):
        pass
    provider.force_flush()
    rows = sql_json(
        store,
        "SELECT train_step, train_tokens, service_name, role, devices FROM train_steps",
    )
    assert rows == [
        {"train_step": 0, "train_tokens": 512, "service_name": "my-trainer", "role": "train", "devices": 4.0}
    ]
    rl.shutdown()


@pytest.mark.parametrize("own_provider", [False, True])
def test_rollscopes_spans_leave_the_jobs_random_numbers_alone(store, own_provider):
    """A seeded job draws the same numbers with rollscope attached: the SDK's default id generator draws every
    span id from the module-level ``random``; rollscope's spans do not, on its provider or on the job's."""
    import random

    from rollscope.collectors import attach

    provider = TracerProvider() if own_provider else None
    rl = attach(store=store, run_id="seeded", tracer_provider=provider, set_global=False)
    random.seed(7)
    for i in range(5):
        with rl.rollout(f"r{i}"), rl.turn(0, input_tokens=3):
            pass
    drawn = random.random()
    rl.force_flush()
    rl.shutdown()
    random.seed(7)
    assert drawn == random.random()
    assert sql_json(store, "SELECT count(*) AS n FROM rollouts") == [{"n": 5}]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_ids_of_its_own(attached):
    """Private ids reseed in a forked child, as ``random`` does: else a child's spans would repeat its parent's."""
    rl = attached()
    ids = rl.tracer.id_generator
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, f"{ids.generate_trace_id()} {ids.generate_span_id()}".encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode().split()
    assert [int(child[0]), int(child[1])] != [ids.generate_trace_id(), ids.generate_span_id()]


def test_the_installed_console_script_reads_the_store(attached, store):
    import subprocess
    import sys
    from pathlib import Path

    rl = attached()
    with rl.rollout("r1", environment="math"):
        pass
    rl.force_flush()
    script = Path(sys.executable).with_name("rollscope")
    done = subprocess.run(
        [script, "sql", "--store", store, "--format", "csv", "SELECT environment FROM rollouts"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["environment", "math"]


def test_shutdown_waits_for_a_publish_already_in_flight(tmp_path):
    from rollscope.collectors import attach

    # The background flush publishes every few milliseconds; a shutdown racing it must not report (or lose)
    # the spans that publish was still writing. Each attempt counts the spans in the store's files as soon as
    # shutdown returns (what a process that exits then leaves behind); the last reads them as a user would.
    for attempt in range(10):
        store = tmp_path / f"s{attempt}"
        rl = attach(store=store, run_id="race", segment_seconds=0.001, set_global=False)
        for i in range(2_000):
            with rl.tracer.start_as_current_span("rl.turn", attributes={"rl.turn.index": i}):
                pass
        rl.shutdown()
        assert rl.stats["spans_exported"] == 2_000
        assert spans_on_disk(store) == 2_000
    assert sql_json(store, "SELECT count(*) AS n FROM turns") == [{"n": 2_000}]


def test_genai_reasoning_and_cache_creation_tokens_and_mismatch_land_in_their_columns(attached, store):
    rl = attached(role="rollout")
    with rl.tracer.start_as_current_span(
        "rl.turn",
        attributes={
            "rl.rollout.id": "r1",
            "gen_ai.usage.input_tokens": 2000,
            "gen_ai.usage.cache_creation.input_tokens": 1800,
            "gen_ai.usage.output_tokens": 900,
            "gen_ai.usage.reasoning.output_tokens": 700,
        },
    ):
        pass
    with rl.sample("r1", 3, "used", mismatch_kl=0.004, logprob_diff_max=1.5):
        pass
    assert rl.force_flush()
    turns = sql_json(
        store,
        "SELECT reasoning_tokens, cache_creation_input_tokens, coalesce(attributes::VARCHAR, '') AS extra"
        " FROM spans WHERE name = 'rl.turn'",
    )
    assert turns[0]["reasoning_tokens"] == 700 and turns[0]["cache_creation_input_tokens"] == 1800
    assert "reasoning" not in turns[0]["extra"]  # a typed column, not left over in the JSON
    samples = sql_json(store, "SELECT mismatch_kl, logprob_diff_max, logprob_diff_mean FROM samples")
    assert samples == [{"mismatch_kl": 0.004, "logprob_diff_max": 1.5, "logprob_diff_mean": None}]
