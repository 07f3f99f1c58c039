"""`rollscope check`: health rules a user runs from cron or CI, one line each, exit 1 when any fails."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rollscope.queries import analyses, connect
from rollscope.store.layout import SegmentWriter
from rollscope.store.schema import COLLECTOR_STATS_SCHEMA
from tests.conftest import rollscope
from tests.test_analyses import TinyRun
from tests.test_analyses_simulated import simulated

RULES = [
    "drafter-logprobs",
    "acceptance-drift",
    "staleness-violations",
    "nonzero-signal",
    "dropped-spans",
    "mismatch-kl",
    "stall",
    "entropy-collapse",
    "kl-acceleration",
    "length-drift",
    "length-limit",
    "reward-dominance",
    "reward-divergence",
    "group-collapse",
    "mismatch-rising",
]


def check(store, run_id, *thresholds):
    code, out, err = rollscope(
        "check", "--store", store, "--run", run_id, *[a for t in thresholds for a in ("--threshold", t)]
    )
    lines = out.splitlines()
    return code, {line.split(":")[0].split(" ", 1)[1]: line for line in lines}, err


@pytest.mark.long
def test_the_sample_runs_drafter_logprob_stretch_fails():
    store, truth = simulated("sample-preset")
    code, lines, _ = check(store, "sample-preset")
    assert code == 1
    assert list(lines) == RULES
    first, last = truth["events"]["logprob_drafter_policy_versions"]
    assert lines["drafter-logprobs"].startswith("FAIL drafter-logprobs: ")
    versions = str(first) if first == last else f"{first}–{last}"
    assert f"policy versions {versions};" in lines["drafter-logprobs"]
    assert lines["staleness-violations"].startswith("FAIL")  # the preset's staleness excursion
    assert lines["dropped-spans"].startswith("PASS")
    first, last = truth["events"]["mismatch_excursion_steps"]  # the preset's mismatch excursion
    trained = [
        s["train_step"]
        for s in truth["learning"]["by_step"]
        if first <= s["train_step"] <= last and s["mismatch"]["samples"]
    ]
    assert lines["mismatch-kl"].startswith("FAIL mismatch-kl: ")
    assert f"steps {trained[0]}–{trained[-1]};" in lines["mismatch-kl"]
    assert lines["stall"].startswith("PASS stall: no rollout in flight")  # a finished run: nothing in flight


@pytest.mark.long
def test_a_clean_run_passes_every_rule():
    store, _ = simulated("clean")
    code, lines, _ = check(store, "clean")
    assert code == 0
    assert list(lines) == RULES
    assert all(line.startswith("PASS ") for line in lines.values())


@pytest.mark.long
def test_thresholds_are_configurable():
    store, truth = simulated("sample-preset")
    turns = truth["run"]["spec_decode"]["drafter_logprob_turns"]
    _, lines, _ = check(store, "sample-preset", f"drafter-logprobs={turns}", "staleness-violations=1")
    assert lines["drafter-logprobs"].startswith("PASS")
    assert lines["staleness-violations"].startswith("PASS")


def test_an_unknown_threshold_is_refused_with_the_known_ones(store):
    with pytest.raises(SystemExit) as exit_:
        rollscope("check", "--store", store, "--run", "x", "--threshold", "vibes=1")
    assert exit_.value.code == 2


def test_nonzero_signal_collapse_and_dropped_spans_fail(store):
    run = TinyRun(store)
    for g in range(4):  # every group solved by all its members: no signal left
        for m in range(4):
            run.rollout(f"g{g}-{m}", f"g{g}", 1.0)
    run.train_step(0, 11, 20)
    run.done()
    stats = {f.name: [None if pa.types.is_string(f.type) else 0] for f in COLLECTOR_STATS_SCHEMA}
    stats.update(time_ns=[1], instance_id=["rollout-0"], source=["exporter"], pid=[1], spans_dropped=[7])
    SegmentWriter(store, "collector_stats").publish("tiny", pa.table(stats, schema=COLLECTOR_STATS_SCHEMA))
    code, lines, _ = check(store, "tiny")
    assert code == 1
    assert lines["nonzero-signal"].startswith("FAIL nonzero-signal: nonzero-signal rate 0.0 %")
    assert lines["dropped-spans"] == (
        "FAIL dropped-spans: 7 spans dropped and 0 failed by the exporters (at most 0 allowed)"
    )


def test_dropped_spans_are_the_spans_the_throughput_figures_call_lost(store):
    run = TinyRun(store)
    run.rollout("r1", "g", 1.0)
    run.done()
    stats = {f.name: [None if pa.types.is_string(f.type) else 0] * 2 for f in COLLECTOR_STATS_SCHEMA}
    stats.update(
        time_ns=[1, 1],
        instance_id=["rollout-0", "judge-0"],
        source=["exporter", "exporter"],
        pid=[1, 2],
        spans_dropped=[3, 0],
        spans_failed=[1, 1],
    )
    SegmentWriter(store, "collector_stats").publish("tiny", pa.table(stats, schema=COLLECTOR_STATS_SCHEMA))
    code, lines, _ = check(store, "tiny")
    figures = analyses.throughput(connect(store), "tiny")
    assert (figures["dropped_spans"], figures["failed_spans"]) == (3, 2)
    assert lines["dropped-spans"] == (
        "FAIL dropped-spans: 3 spans dropped and 2 failed by the exporters (at most 0 allowed)"
    )


@pytest.mark.slow
def test_the_shipped_sample_run_fails_exactly_on_its_misconfigurations(tmp_path):
    from rollscope.simulator import config, simulate

    simulate(tmp_path / "store", "sample", config.resolve("sample"), preset="sample", workers=2)
    code, lines, _ = check(tmp_path / "store", "sample")
    assert code == 1
    assert (
        lines["drafter-logprobs"].startswith("FAIL") and "policy versions 84–89;" in lines["drafter-logprobs"]
    )
    assert lines["staleness-violations"].startswith("FAIL")
    assert lines["nonzero-signal"].startswith("PASS") and lines["dropped-spans"].startswith("PASS")


@pytest.mark.long
def test_each_check_value_reads_as_its_message_states_it():
    """The Overview shows value and threshold beside the message: 47.5 % beside '47.5 %', not 0.475."""
    from rollscope import formats
    from rollscope.queries.checks import run_checks

    store, _ = simulated("sample-preset")
    results = run_checks(connect(store), "sample-preset")
    for r in results:
        if r.value is not None:
            assert formats.check_value(r.value, r.unit) in r.message, (r.name, r.unit, r.message)
    units = {r.name: r.unit for r in results}
    assert units["staleness-violations"] == units["nonzero-signal"] == "share"
    assert formats.check_value(0.475, "share") == "47.5 %"
    assert formats.check_value(32.9757, "points") == "33.0 points"
