"""Is it stuck: liveness, rollouts in flight, scoring latency and goodput held to the simulator's ground truth
(docs/simulator.md, "health") through both readers, and `rollscope check` flagging a stall while a paced
simulation is still writing it, then passing once the run is healthy again."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time

import pytest

from rollscope.app import cli
from rollscope.queries import analyses, checks, connect
from rollscope.queries.report import report
from tests.simulated_runs import simulated

RUN = "stall"


@pytest.fixture(scope="module", params=[False, True], ids=["parquet", "materialized"])
def run(request):
    """The `stall` preset's run (a silent worker, a scoring stall, weight-sync bubbles), read from the
    derived Parquet files and through the dashboard's materialized reader: (connection, health truth)."""
    store, truth = simulated(RUN)
    return connect(store, materialize=request.param), truth["health"]


def by_step(truth: dict, part: str) -> dict:
    return {s["train_step"]: s[part] for s in truth["by_step"] if s[part] is not None}


@pytest.mark.long
def test_scoring_latency_per_step_matches(run):
    con, truth = run
    frame = analyses.scoring_latency(con, RUN)
    expected = by_step(truth, "scoring")
    assert set(frame["step"]) == set(expected)
    for row in frame.itertuples():
        want = expected[row.step][row.kind]
        assert (row.calls, row.timeouts) == (want["calls"], want["timeouts"])
        assert row.p50_s == pytest.approx(want["p50_s"], rel=1e-6)
        assert row.p99_s == pytest.approx(want["p99_s"], rel=1e-6)


@pytest.mark.long
def test_the_scoring_stall_shows_in_its_steps(run):
    con, truth = run
    frame = analyses.scoring_latency(con, RUN).set_index(["step", "kind"])["p50_s"]
    stalled = [6 * 2, 6 * 2 + 1]  # scoring_stall [0.6, 0.7) of 20 steps: steps 12 and 13
    calm = frame.drop(index=stalled, level="step")
    assert frame.loc[stalled].xs("judge", level="kind").min() > 3 * calm.xs("judge", level="kind").median()


@pytest.mark.long
def test_trainer_goodput_per_step_matches(run):
    con, truth = run
    frame = analyses.trainer_goodput(con, RUN).set_index("step")
    expected = by_step(truth, "trainer")
    assert list(frame.index) == sorted(expected)
    for step, want in expected.items():
        for key, value in want.items():
            assert frame.at[step, key] == pytest.approx(value, rel=1e-6, abs=1e-6), (step, key)
    bubbles = frame.loc[[4, 5], "sync_wait_s"]  # weight_sync_bubbles [0.2, 0.3) of 20 steps
    assert bubbles.min() > 5 * frame.drop(index=[4, 5])["sync_wait_s"].median()


@pytest.mark.long
def test_rollout_fleet_goodput_per_step_and_run_match(run):
    con, truth = run
    frame = analyses.rollout_goodput(con, RUN)
    steps = frame[frame["step"].notna()].set_index("step")
    for step, want in by_step(truth, "rollout").items():
        if step is None:
            continue
        for key, value in want.items():
            assert steps.at[step, key] == pytest.approx(value, rel=1e-6, abs=1e-6), (step, key)
    totals = analyses.goodput(con, RUN)
    for key, value in truth["rollout"].items():
        assert totals[f"rollout_{key}"] == pytest.approx(value, rel=1e-6)


@pytest.mark.long
def test_device_seconds_on_rollouts_never_used_match(run):
    con, truth = run
    frame = analyses.wasted_devices(con, RUN)
    frame = frame.fillna({c: 0.0 for c in frame.columns if c != "step"})
    expected = {s["train_step"]: s["wasted"] for s in truth["by_step"] if s["wasted"] is not None}
    for row in frame[frame["step"].notna()].itertuples():
        for key, value in expected[row.step].items():
            assert getattr(row, key) == pytest.approx(value, rel=1e-6, abs=1e-6), (row.step, key)
    totals = analyses.goodput(con, RUN)
    for key, value in truth["wasted"].items():
        assert (totals[f"wasted_{key}"] or 0.0) == pytest.approx(value, rel=1e-6, abs=1e-6)
    assert truth["wasted"]["aborted_device_s"] > 0  # the hung rollout, aborted, counts


@pytest.mark.long
def test_liveness_per_process_matches_as_of_the_last_span(run):
    con, truth = run
    frame = analyses.liveness(con, RUN).set_index("instance_id")
    assert int(frame["as_of_ns"].iloc[0]) == truth["as_of_ns"]
    assert frame["silent_s"].to_dict() == pytest.approx(
        {name: p["silent_s"] for name, p in truth["processes"].items()}
    )
    assert analyses.in_flight(con, RUN).empty  # finished: every rollout, the hung one too, has ended


@pytest.mark.long
def test_report_keys_equal_the_truth(run):
    con, truth = run
    figures = json.loads(json.dumps(report(con, RUN)))
    health, goodput = figures["health"], figures["goodput"]
    assert health["in_flight"] == 0 and health["oldest_in_flight_s"] is None
    silent = max(truth["processes"].items(), key=lambda kv: kv[1]["silent_s"])
    assert (health["most_silent_process"], health["most_silent_s"]) == (
        silent[0],
        pytest.approx(silent[1]["silent_s"]),
    )
    for kind in ("verifier", "judge"):
        assert health["scoring"][kind] == pytest.approx(truth["scoring"][kind])
    assert goodput["trainer_computing_s"] == pytest.approx(truth["trainer"]["computing_s"])
    assert goodput["trainer_sync_wait_s"] == pytest.approx(truth["trainer"]["sync_wait_s"])


@pytest.mark.long
def test_the_stall_rule_passes_a_finished_run_and_fails_when_now_is_long_after_it(run):
    con, truth = run
    ok = {r.name: r for r in checks.run_checks(con, RUN)}["stall"]
    assert ok.ok, ok.message
    later = truth["as_of_ns"] + 3_600 * 10**9  # wall-clock now an hour after the last span: all went silent
    failed = {r.name: r for r in checks.run_checks(con, RUN, now_ns=later)}["stall"]
    assert not failed.ok and "silent for" in failed.message and failed.value >= 3_600


def _check(store, run_id: str) -> str:
    """`rollscope check` (its command-line entry point, in this process: no interpreter start per poll) with
    stall thresholds below the simulated stall; its stall line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(
            ["check", "--store", str(store), "--run", run_id]
            + ["--threshold", "stall-silence=400", "--threshold", "stall-rollout-age=450"]
        )
    lines = [line for line in out.getvalue().splitlines() if " stall: " in line]
    return lines[0] if lines else out.getvalue()


@pytest.mark.slow  # a paced run of ~65 s watched by `rollscope check` every few seconds
def test_check_flags_a_stall_while_the_run_is_written_and_passes_once_healthy(tmp_path):
    """A paced `rollscope simulate --preset stall` in a subprocess, and `rollscope check` run against it, as
    a user's cron job would: rollout server 1 goes silent with a rollout hung, then comes back."""
    store = tmp_path / "store"
    knobs = tmp_path / "knobs.json"
    knobs.write_text(
        json.dumps(
            {
                "steps": 16,
                "groups_per_step": 4,
                "group_size": 4,
                "silent_worker": {"server": 1, "at": 0.2, "seconds": 1400},
            }
        )
    )
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rollscope.app.cli",
            "simulate",
            "--store",
            str(store),
            "--run-id",
            "live",
            "--preset",
            "stall",
            "--config",
            str(knobs),
            "--pace",
            "4",
            "--workers",
            "2",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        while sim.poll() is None:
            if (store / "spans").exists():
                line = _check(store, "live")
                if sim.poll() is None:
                    seen.append(line)
            time.sleep(0.5)
        assert sim.returncode == 0, sim.stdout.read()
    finally:
        if sim.poll() is None:
            sim.kill()
    flagged = [line for line in seen if line.startswith("FAIL stall")]
    assert flagged, seen
    assert any("rollout-server-1@live silent" in line or "hung-1" in line for line in flagged), flagged
    final = _check(store, "live")
    assert final.startswith("PASS stall"), final
