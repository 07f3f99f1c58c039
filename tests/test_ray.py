"""Runs derived on a real local Ray cluster of two nodes, and the store read by Ray Data, never a mocked Ray.

`rollscope derive --ray` must give the tables a local derivation gives, incrementally too, keep the per-run
lock against a local reader deriving the same run, and connect to a cluster that uses token authentication;
Ray Data reads the store's live file list (never the files a merge replaced) and computes each run's funnel
as rollscope does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmarks.fixtures.derived_rows import derived
from benchmarks.fixtures.ray_cluster import environment, local_cluster
from rollscope.queries import Reader
from rollscope.queries.analyses import funnel
from rollscope.store import compaction, engines, layout
from tests.simulated_runs import raw_store, simulated
from tests.test_reader_incremental import stored_spans

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNS = ("samples", "derived", "clean")


@pytest.fixture(scope="module")
def cluster():
    """Two nodes of one CPU each: two runs' tasks at once land on both."""
    with local_cluster(nodes=2, cpus=1) as address:
        yield address


def runs_store(root: Path, runs=RUNS) -> Path:
    """A store of simulated runs' raw segments, nothing derived, under a name of its own."""
    return raw_store(root / f"store-{uuid.uuid4().hex[:6]}", runs)


def derive_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`rollscope derive` as a user runs it, in its own process."""
    exe = Path(sys.executable).with_name("rollscope")
    return subprocess.run(
        [exe, "derive", *args], capture_output=True, text=True, env=env or environment(), timeout=600
    )


def test_runs_derived_on_ray_hold_what_a_local_derivation_holds(cluster, tmp_path):
    on_ray, here = runs_store(tmp_path), runs_store(tmp_path)
    done = derive_cli("--store", str(on_ray), "--all", "--ray", cluster)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in lines[:-1]) == [f"run {r}" for r in sorted(RUNS)]
    assert all("derived (full)" in line for line in lines[:-1]), done.stdout
    nodes = {line.rsplit("(node ", 1)[1] for line in lines[:-1]}
    assert len(nodes) == 2  # one CPU a node: the runs' tasks ran on both
    assert lines[-1].startswith("3 run(s) in ") and lines[-1].endswith(": 3 derived")
    assert derive_cli("--store", str(here), "--all").returncode == 0
    for run in RUNS:
        assert derived(Reader(on_ray, run_id=run), run) == derived(Reader(here, run_id=run), run), run
    again = derive_cli("--store", str(on_ray), "--all", "--ray", cluster)
    assert again.returncode == 0 and again.stdout.endswith(": 3 up to date\n")  # nothing new, nothing derived


def test_a_run_caught_up_on_ray_holds_what_a_fresh_local_derivation_holds(cluster, tmp_path):
    run = "samples"
    spans = stored_spans(simulated(run)[0], run)
    store, fresh = tmp_path / "store", tmp_path / "fresh"
    writer = layout.SegmentWriter(store)
    cut = spans.num_rows * 9 // 10  # fewer new spans than derived: caught up incrementally
    writer.publish(run, spans.slice(0, cut))
    assert derive_cli("--store", str(store), "--ray", cluster).returncode == 0
    writer.publish(run, spans.slice(cut))
    done = derive_cli("--store", str(store), "--run", run, "--ray", cluster)
    assert done.returncode == 0 and "derived (incremental)" in done.stdout, done.stdout + done.stderr
    layout.SegmentWriter(fresh).publish(run, spans)
    assert derived(Reader(store, run_id=run), run) == derived(Reader(fresh, run_id=run), run)


def test_a_run_derived_on_ray_and_here_at_once_is_derived_once(cluster, tmp_path):
    """The per-run lock holds between a Ray worker and a local process: one derives, the other waits for it
    and reads its result (or finds it current)."""
    store = runs_store(tmp_path, ("samples",))
    exe = Path(sys.executable).with_name("rollscope")
    local = subprocess.Popen(
        [exe, "derive", "--store", str(store)], stdout=subprocess.PIPE, text=True, env=environment()
    )
    remote = derive_cli("--store", str(store), "--ray", cluster)
    said = [
        line
        for line in (remote.stdout + local.communicate(timeout=600)[0]).splitlines()
        if line.startswith("run ")
    ]
    assert remote.returncode == local.returncode == 0
    assert len(said) == 2 and sum("derived (full) in" in line for line in said) == 1, said
    assert sum(("derived by another process" in line or "up to date" in line) for line in said) == 1, said


def test_derive_reaches_a_cluster_that_uses_tokens_with_its_token_and_says_why_not_without(tmp_path):
    token = uuid.uuid4().hex * 2
    store = runs_store(tmp_path, ("samples",))
    tokenless = {k: v for k, v in environment().items() if k != "RAY_AUTH_MODE"}  # a user's shell
    tokenless["HOME"] = str(tmp_path)  # no ~/.ray/auth_token
    with local_cluster(nodes=1, cpus=1, env=environment("token", token)) as address:
        refused = derive_cli("--store", str(store), "--ray", address, env=tokenless)
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "uses token authentication" in refused.stderr, (
            refused.stderr
        )
        done = derive_cli("--store", str(store), "--ray", address, env=environment("token", token))
        assert done.returncode == 0 and "run samples: derived (full)" in done.stdout, done.stderr


@pytest.fixture
def ray_client(cluster):
    ray.init(address=cluster, logging_level="WARNING", log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_data_computes_every_runs_funnel_as_rollscope_does(cluster, tmp_path, ray_client):
    store = runs_store(tmp_path)
    assert derive_cli("--store", str(store), "--all", "--ray", cluster).returncode == 0

    def stage_counts(batch):  # rollouts per stage, from the funnel's per-step outcome counts (funnel.sql)
        counted = {"run_id": batch["run_id"], "dispatched": batch["rollouts"]}
        for stage in ("completed", "scored", "nonzero_signal", "fresh", "usable"):
            counted[stage] = batch["rollouts"].where(batch[stage].fillna(False).astype(bool), 0)
        return batch.__class__(counted)

    sums = engines.ray_dataset(store, "funnel_sums").map_batches(stage_counts, batch_format="pandas")
    on_ray = {row.pop("run_id"): row for row in sums.groupby("run_id").sum().take_all()}
    stages = ("dispatched", "completed", "scored", "nonzero_signal", "fresh", "usable")
    for run in RUNS:
        answer = funnel(Reader(store, run_id=run).con, run).iloc[0]
        assert {s: int(on_ray[run][f"sum({s})"]) for s in stages} == {s: int(answer[s]) for s in stages}, run
    assert set(on_ray) == set(RUNS)


def test_ray_data_reads_each_span_once_while_a_merges_sources_are_still_listed(cluster, tmp_path, ray_client):
    store = runs_store(tmp_path, ("samples", "clean"))
    expected = {
        run: sum(pq.read_metadata(f).num_rows for f in layout.segments(store, "spans", run))
        for run in ("samples", "clean")
    }
    directory = layout.partition_dir(store, "spans", "samples")
    layout.SegmentWriter(store).publish("samples", stored_spans(store, "samples").slice(0, 100))
    expected["samples"] += 100
    # A merge published, its sources not yet moved aside (for a second, or until the next compaction after a
    # kill): both are in the partition.
    compaction.merge(directory, layout.segments(store, "spans", "samples"))
    assert len(os.listdir(directory)) > len(layout.segments(store, "spans", "samples"))
    spans = engines.ray_dataset(store, "spans").select_columns(["run_id", "span_id"])
    counts = spans.groupby("run_id").count().take_all()
    assert {row["run_id"]: row["count()"] for row in counts} == expected
    every_file = sorted(str(f) for f in directory.glob("*.parquet"))  # what reading the folder reads
    assert ray.data.read_parquet(every_file).count() > expected["samples"]  # the merged rows twice
