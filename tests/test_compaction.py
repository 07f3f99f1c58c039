"""Compaction by itself while a run is written, its guarantees to readers, and `rollscope rm`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollscope.errors import UnknownRunError
from rollscope.queries import connect
from rollscope.queries.analyses import require_run
from rollscope.queries.reader import Reader
from rollscope.store import compaction, layout
from tests.conftest import python, rollscope

WRITER = """
import sys, time
from rollscope.collectors import attach
from rollscope.store.layout import segments
rl = attach(store=sys.argv[1], run_id="live", segment_seconds=0.02, set_global=False)
for i in range(int(sys.argv[2])):
    with rl.rollout(f"r{i}", task_id=f"t{i % 7}", environment="swe", policy_version=i // 50):
        pass
    if i % 10 == 9:
        rl.force_flush()
        time.sleep(0.005)
rl.force_flush()
deadline = time.time() + 60  # the job goes on a while: its compactor catches up with what it wrote
while time.time() < deadline and len(segments(sys.argv[1], "spans", "live")) > 20:
    time.sleep(0.1)
rl.shutdown()
"""


def live_partition(store: Path, run: str = "live") -> Path:
    return layout.partition_dir(store, "spans", run)


def test_writers_compact_their_run_by_themselves_and_readers_never_see_duplicates_or_gaps(store):
    total = 3000
    env = {**os.environ, "ROLLSCOPE_COMPACT": "1", "ROLLSCOPE_COMPACT_SECONDS": "0.2"}
    writer = python(WRITER, str(store), str(total), env=env, stdout=subprocess.DEVNULL)
    con = duckdb.connect()
    seen, live_counts = [], []
    while writer.poll() is None or not seen or seen[-1][0] < total:
        files = layout.segments(store, "spans", "live")
        if not files:
            time.sleep(0.05)
            continue
        live_counts.append(len(files))
        # One listing, then read: compactions publishing in between must not make rows appear twice or vanish.
        rows, distinct = con.execute(
            "SELECT count(*), count(DISTINCT span_id) FROM read_parquet(?, union_by_name=true)",
            [[str(f) for f in files]],
        ).fetchone()
        seen.append((rows, distinct))
        assert writer.poll() is None or writer.returncode == 0
    assert writer.wait(timeout=120) == 0
    assert all(rows == distinct for rows, distinct in seen)  # no duplicates, ever
    assert [r for r, _ in seen] == sorted(r for r, _ in seen)  # no rows ever went missing
    assert seen[-1][0] == total
    published = len(list(live_partition(store).glob("seg-*")))
    assert published >= 200
    final = layout.segments(store, "spans", "live")
    assert len(final) <= 20 < published  # the compactor kept up with the writer: a few files per tier
    assert all(f.name.startswith("cmp-") for f in final if pq.read_metadata(f).num_rows > 100)
    # Replaced segments outlive readers that listed them: within the grace period every one is still there.
    assert published == len(list(live_partition(store).glob("seg-*")))
    assert int(Reader(store).sql("SELECT count(DISTINCT rollout_id) AS n FROM rollouts").n[0]) == total


@pytest.mark.parametrize("setting", ["0", "1"])
def test_compact_0_turns_the_background_compactor_off(store, attached, monkeypatch, setting):
    monkeypatch.setenv("ROLLSCOPE_COMPACT", setting)
    rl = attached(run_id="quiet", segment_seconds=0.01, compact_seconds=0.05)
    for i in range(40):
        with rl.rollout(f"r{i}"):
            pass
        rl.force_flush()
    deadline = time.time() + (20 if setting == "1" else 1)
    while time.time() < deadline and not list(live_partition(store, "quiet").glob("cmp-*")):
        time.sleep(0.05)
    compacted = bool(list(live_partition(store, "quiet").glob("cmp-*")))
    assert compacted == (setting == "1")
    assert (len(layout.segments(store, "spans", "quiet")) == 40) == (setting == "0")


def write_segments(store: Path, run: str, sizes: list[int], start: int = 0) -> list[Path]:
    writer = layout.SegmentWriter(store, "spans")
    paths, first = [], start
    for n in sizes:
        ids = pa.array(range(first, first + n), pa.uint64())
        paths.append(writer.publish(run, pa.table({"span_id": ids, "name": pa.array(["s"] * n)})))
        first += n
    return paths


def live_ids(store: Path, run: str) -> list[int]:
    files = layout.segments(store, "spans", run)
    return sorted(
        pa.concat_tables([pq.read_table(f, columns=["span_id"]) for f in files])["span_id"].to_pylist()
    )


def test_tiers_keep_the_live_files_of_a_run_logarithmic(store):
    directory = live_partition(store, "r")
    for batch in range(40):
        write_segments(store, "r", [10] * 25, start=batch * 250)
        compaction.compact_partition(directory, grace_seconds=0)
        assert live_ids(store, "r") == list(range((batch + 1) * 250))
        files = layout.segments(store, "spans", "r")
        by_tier = {}
        for f in files:
            by_tier.setdefault(compaction.tier(pq.read_metadata(f).num_rows), []).append(f)
        assert all(len(group) < compaction.FANOUT for group in by_tier.values())
    assert len(layout.segments(store, "spans", "r")) < 2 * compaction.FANOUT


def test_replaced_files_are_deleted_only_after_the_grace_period_and_sources_first(store, monkeypatch):
    directory = live_partition(store, "r")
    write_segments(store, "r", [1] * 64)  # 8 merges of tier 0, then one of tier 1: merged files replaced too
    compaction.compact_partition(directory, grace_seconds=60)
    listed = layout.segments(store, "spans", "r")
    assert len(listed) < 8 and live_ids(store, "r") == list(range(64))
    on_disk = {p.name for p in directory.glob("*.parquet")}
    assert compaction.sweep(directory, 60, now=time.time() + 30) == 0  # a reader may still read them
    assert {p.name for p in directory.glob("*.parquet")} == on_disk
    # Every single deletion leaves a store that reads the same rows: a sweep killed anywhere is harmless.
    unlink = Path.unlink

    def checked_unlink(path, missing_ok=False):
        unlink(path, missing_ok=missing_ok)
        assert live_ids(store, "r") == list(range(64))

    monkeypatch.setattr(Path, "unlink", checked_unlink)
    assert compaction.sweep(directory, 60, now=time.time() + 61) == len(on_disk) - len(listed)
    monkeypatch.undo()
    assert {p.name for p in directory.glob("*.parquet")} == {p.name for p in listed}


def test_a_reader_that_listed_files_before_a_compaction_finishes_its_query(store):
    write_segments(store, "r", [5] * 40)
    con = connect(store, run_id="r")  # lists the 40 segments now
    compaction.compact_partition(live_partition(store, "r"), mode="full", grace_seconds=300)
    assert len(layout.segments(store, "spans", "r")) == 1
    assert con.execute("SELECT count(*), count(DISTINCT span_id) FROM spans").fetchone() == (200, 200)


def test_a_failing_compaction_never_reaches_the_job(store, attached):
    directory = live_partition(store, "broken")
    directory.mkdir(parents=True)
    (directory / "seg-0000000000001-bad-000001.parquet").write_bytes(b"not parquet")
    rl = attached(run_id="broken", segment_seconds=0.01, compact=True, compact_seconds=0.05)
    for i in range(30):
        with rl.rollout(f"r{i}"):
            pass
        assert rl.force_flush()
    deadline = time.time() + 20
    while compaction.compactor().failures == 0 and time.time() < deadline:
        time.sleep(0.05)
    assert compaction.compactor().failures > 0
    with rl.rollout("after"):
        pass
    assert rl.force_flush()
    assert rl.exporter.stats.snapshot()["spans_failed"] == 0


def test_compact_waits_for_a_background_compactor_and_gives_the_same_rows(store):
    write_segments(store, "r", [3] * 50)
    directory = live_partition(store, "r")
    with compaction.partition_lock(directory, wait=False) as held:
        assert held
        assert compaction.compact_partition(directory) is None  # a background attempt skips, never waits
    result = layout.compact(store, "r", grace_seconds=0)
    assert (result.files_before, result.files_after) == (50, 1)
    assert live_ids(store, "r") == list(range(150))


# --- rollscope rm ------------------------------------------------------------------------------------------


@pytest.fixture
def two_runs(store, attached):
    for run, n in (("exp-1", 3), ("exp-2", 5)):
        rl = attached(run_id=run)
        for i in range(n):
            with rl.rollout(f"{run}-{i}"):
                pass
        rl.force_flush()
    for run in ("exp-1", "exp-2"):  # derived data: opening a run derives it (store/derived.py)
        Reader(store, run_id=run)
        assert (store / "derived" / f"run_id={run}" / "manifest.json").is_file()
    return store


def test_rm_removes_one_run_raw_and_derived_while_a_reader_of_another_run_reads(two_runs):
    store = two_runs
    other = Reader(store, run_id="exp-2", materialize=True)
    removed = Reader(store, run_id="exp-1")
    code, out, err = rollscope("rm", "--store", store, "--run", "exp-1")
    assert (code, err) == (0, "")
    assert out.startswith("removed run exp-1: 3 partition(s)")
    assert not list(store.rglob("run_id=exp-1")) and not list(store.rglob(".deleted-*"))
    assert len(list(store.rglob("run_id=exp-2"))) == 3
    other.refresh()
    assert int(other.sql("SELECT count(*) AS n FROM rollouts").n[0]) == 5
    assert layout.run_ids(store) == ["exp-2"]
    code, out, err = rollscope("report", "--store", store, "--run", "exp-1")
    assert code == 1 and out == ""
    assert err == "rollscope: Unknown run: no run 'exp-1' in this store (`rollscope runs` lists them)\n"
    removed.refresh()
    with pytest.raises(UnknownRunError, match="no run 'exp-1' in this store"):
        require_run(removed.con, "exp-1")


def test_rm_of_an_unknown_or_invalid_run_is_one_line_and_removes_nothing(two_runs):
    store = two_runs
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    code, _, err = rollscope("rm", "--store", store, "--run", "exp-9")
    assert (
        code == 1
        and err == f"rollscope: Unknown run: no run 'exp-9' in {store} (`rollscope runs` lists them)\n"
    )
    code, _, err = rollscope("rm", "--store", store, "--run", "../exp-2")
    assert (
        code == 1
        and err.startswith("rollscope: Bad run id: invalid run id '../exp-2'")
        and err.count("\n") == 1
    )
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_a_bare_duckdb_reading_the_raw_files_as_documented_counts_each_span_once(store, attached):
    rl = attached(run_id="ext", segment_seconds=0.01)
    for i in range(40):
        with rl.rollout(f"r{i}"):
            pass
        rl.force_flush()
    layout.compact(store, "ext")  # replaced segments stay on disk for the grace period
    assert len(list(live_partition(store, "ext").glob("seg-*"))) == 40
    script = (
        "import duckdb, sys\n"
        "files = f'{sys.argv[1]}/spans/*/*.parquet'\n"
        "src = f\"read_parquet('{files}', hive_partitioning = true, union_by_name = true)\"\n"
        "con = duckdb.connect()\n"
        "print(con.execute(f'SELECT count(*) FROM {src}').fetchone()[0])\n"
        "print(con.execute(f'SELECT count(*) FROM (SELECT * FROM {src} "
        "QUALIFY row_number() OVER (PARTITION BY trace_id, span_id) = 1) WHERE run_id = ?', ['ext']"
        ").fetchone()[0])\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", script, str(store)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    every_file, once = map(int, out.stdout.split())
    assert (every_file, once) == (
        80,
        40,
    )  # globbing alone counts replaced files too; the documented rule does not
