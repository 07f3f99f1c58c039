"""Compaction by itself while a run is written, its guarantees to readers, and `rollscope rm`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollscope.errors import UnknownRunError
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


def read_listing(con, files: list[Path]) -> tuple[int, int]:
    """Rows and distinct span ids of one listing, read as a reader does: a file a compaction moved aside since
    the listing is read where it now is (``layout.resolve``: the same files), or the run is listed again."""
    for _ in range(5):
        try:
            return con.execute(
                "SELECT count(*), count(DISTINCT span_id) FROM read_parquet(?, union_by_name=true)",
                [[str(f) for f in files]],
            ).fetchone()
        except duckdb.IOException:
            files = layout.resolve(files) or layout.segments(files[0].parent.parent.parent, "spans", "live")
    raise AssertionError("a listing could not be read five times in a row")


def listed(partition: Path) -> int:
    """Files a reader lists in the partition (what `os.listdir` returns that ends in .parquet)."""
    return sum(name.endswith(".parquet") for name in os.listdir(partition))


@pytest.mark.long  # writer processes: ~30 CPU-seconds: `make test-all` runs it
def test_writers_compact_their_run_by_themselves_and_readers_never_see_duplicates_or_gaps(store):
    total = 3000
    env = {**os.environ, "ROLLSCOPE_COMPACT": "1", "ROLLSCOPE_COMPACT_SECONDS": "0.2"}
    writer = python(WRITER, str(store), str(total), env=env, stdout=subprocess.DEVNULL)
    con = duckdb.connect()
    seen = []
    while writer.poll() is None or not seen or seen[-1][0] < total:
        files = layout.segments(store, "spans", "live")
        if not files:
            time.sleep(0.05)
            continue
        # One listing, then read: compactions publishing in between must not make rows appear twice or vanish.
        seen.append(read_listing(con, files))
        assert writer.poll() is None or writer.returncode == 0
    assert writer.wait(timeout=120) == 0
    assert all(rows == distinct for rows, distinct in seen)  # no duplicates, ever
    assert [r for r, _ in seen] == sorted(r for r, _ in seen)  # no rows ever went missing
    assert seen[-1][0] == total
    replaced = live_partition(store) / layout.REPLACED_DIR
    published = {p.name for p in live_partition(store).glob("seg-*")} | {
        p.name for p in replaced.glob("seg-*")
    }
    assert len(published) >= 200
    final = layout.segments(store, "spans", "live")
    assert len(final) <= 20 < len(published)  # the compactor kept up with the writer: a few files per tier
    assert all(f.name.startswith("cmp-") for f in final if pq.read_metadata(f).num_rows > 100)
    # What a reader lists is what is live (how much, while the writer outpaces its compactor, depends on the
    # machine: the bound is test_a_readers_listing_of_a_busy_partition_stays_bounded...), never the replaced
    # files kept for slow readers: within the grace period every one of those is still on disk, aside. The
    # writer's exit may cut its last step short; the next compaction of the run moves what that step left.
    compaction.compact_partition(live_partition(store))
    assert listed(live_partition(store)) == len(layout.segments(store, "spans", "live")) <= 20
    assert len(list(replaced.glob("seg-*"))) == len(published) - len(
        list(live_partition(store).glob("seg-*"))
    )
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


def test_spans_and_the_background_compactor_leave_the_jobs_random_numbers_alone(store, attached, monkeypatch):
    import random

    monkeypatch.setenv("ROLLSCOPE_COMPACT", "1")
    random.seed(1234)
    rl = attached(run_id="seeded", segment_seconds=0.01, compact_seconds=0.05)
    for i in range(40):
        with rl.rollout(f"r{i}"):
            pass
        rl.force_flush()
    deadline = time.time() + 20
    while time.time() < deadline and not list(live_partition(store, "seeded").glob("cmp-*")):
        time.sleep(0.05)
    assert list(live_partition(store, "seeded").glob("cmp-*")), "the compactor never ran"
    drawn = random.random()
    random.seed(1234)
    assert drawn == random.random()  # the job's next draw is the one its seed gives


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


def test_tiers_keep_the_live_files_of_a_run_logarithmic(store, monkeypatch):
    monkeypatch.setattr(
        compaction, "RETIRE_AFTER_S", 0.0
    )  # no listing in flight to wait for: 40 steps at once
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


def test_a_readers_listing_of_a_busy_partition_stays_bounded_while_replaced_files_wait_aside(
    store, monkeypatch
):
    """64 writers publish a segment each per round, a compaction step follows each round, replaced files are
    kept the default 300 s: a reader lists the live files only, a few per tier, not the rounds behind it."""
    monkeypatch.setattr(compaction, "RETIRE_AFTER_S", 0.0)  # no listing in flight to wait for
    directory = live_partition(store, "busy")
    writers = [layout.SegmentWriter(store, "spans") for _ in range(64)]
    listings, first = [], 0
    for _ in range(16):
        for writer in writers:
            ids = pa.array(range(first, first + 5), pa.uint64())
            writer.publish("busy", pa.table({"span_id": ids, "name": pa.array(["s"] * 5)}))
            first += 5
        compaction.compact_partition(directory)
        listings.append(listed(directory))
        assert listings[-1] == len(layout.segments(store, "spans", "busy"))
    kept = len(list((directory / layout.REPLACED_DIR).iterdir()))
    assert live_ids(store, "busy") == list(range(first))
    assert max(listings) <= 4 * (compaction.FANOUT - 1)  # a few tiers of fewer than FANOUT files each
    assert max(listings[8:]) <= max(listings[:8]) + compaction.FANOUT  # not growing with the rounds
    assert kept >= 16 * 64  # every segment is still on disk, aside, for readers that listed it


def test_replaced_files_leave_the_listing_at_once_and_are_deleted_after_the_grace_period(store):
    directory = live_partition(store, "r")
    write_segments(store, "r", [1] * 64)
    assert listed(directory) == 64
    compaction.compact_partition(directory, grace_seconds=60)
    live = layout.segments(store, "spans", "r")
    assert len(live) == 1 and live_ids(store, "r") == list(range(64))
    assert listed(directory) == 1  # a reader lists the merged file alone
    aside = directory / layout.REPLACED_DIR
    assert len(list(aside.glob("seg-*.parquet"))) == 64
    assert compaction.sweep(directory, 60, now=time.time() + 30) == 0  # a reader may still read them
    assert len(list(aside.glob("seg-*.parquet"))) == 64
    assert compaction.sweep(directory, 60, now=time.time() + 61) == 64
    assert list(aside.iterdir()) == [] and live_ids(store, "r") == list(range(64))


def test_a_reader_that_listed_files_before_a_compaction_reads_them_again_or_lists_again(store):
    write_segments(store, "r", [5] * 40)
    listing = layout.segments(store, "spans", "r")
    reader = Reader(store, run_id="r")  # its raw views list the 40 segments now
    compaction.compact_partition(live_partition(store, "r"), mode="full", grace_seconds=300)
    assert len(layout.segments(store, "spans", "r")) == 1
    con = duckdb.connect()
    query = "SELECT count(*), count(DISTINCT span_id) FROM read_parquet(?)"
    with pytest.raises(duckdb.IOException):  # the listing's files moved: an error, never a partial answer
        con.execute(query, [[str(f) for f in listing]]).fetchone()
    assert con.execute(query, [[str(f) for f in layout.resolve(listing)]]).fetchone() == (200, 200)
    assert reader.sql("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM spans").values.tolist() == [
        [200, 200]
    ]  # the reader lists again and answers
    compaction.sweep(live_partition(store, "r"), 300, now=time.time() + 301)
    assert layout.resolve(listing) is None  # past the grace period: only listing again answers


KILLED_COMPACTOR = """
import os, sys, time
from pathlib import Path
from rollscope.store import compaction
rename, write_group = os.rename, compaction._write_group
def slow_rename(a, b):  # moves slowed, so that a kill lands among them
    print("moving", flush=True)
    time.sleep(0.01)
    rename(a, b)
def announced_write_group(*args):
    print("merging", flush=True)
    write_group(*args)
os.rename, compaction._write_group = slow_rename, announced_write_group
compaction.compact_partition(Path(sys.argv[1]), mode="full", grace_seconds=300, target_rows=200)
"""


@pytest.mark.long  # kill -9 at every point
def test_a_compaction_killed_at_any_point_leaves_every_row_once_and_the_next_one_finishes_it(store):
    """A compactor killed with SIGKILL while it merges, or while it moves replaced files aside: the run reads
    each span once after every kill, and the next compaction moves what the killed one left."""
    directory = live_partition(store, "r")
    total, left_listed = 0, []
    for kill_at in ("merging", "moving", "moving", None):
        write_segments(store, "r", [3] * 100, start=total)
        total += 300
        compactor = python(KILLED_COMPACTOR, str(directory), stdout=subprocess.PIPE, text=True)
        for line in compactor.stdout:
            if line.strip() == kill_at:
                time.sleep(0.1 if kill_at == "moving" else 0.0)
                os.kill(compactor.pid, signal.SIGKILL)
                break
        compactor.wait(timeout=60)
        assert compactor.returncode == (-signal.SIGKILL if kill_at else 0)
        assert live_ids(store, "r") == list(range(total))  # every span once: no duplicate, no gap
        left_listed.append(listed(directory) - len(layout.segments(store, "spans", "r")))
    assert (
        left_listed[1] > 0 and left_listed[-1] == 0
    )  # a kill left replaced files listed; the next moved them
    assert listed(directory) == len(layout.segments(store, "spans", "r"))


def test_a_failing_compaction_never_reaches_the_job(store, attached, caplog):
    directory = live_partition(store, "broken")
    directory.mkdir(parents=True)
    bad = directory / "seg-0000000000001-bad-000001.parquet"
    bad.write_bytes(b"not parquet")

    def failures() -> int:
        """This process's compactor's count (one per process, started by its first writer): earlier tests' too."""
        return compaction.compactor().failures if compaction.compactor() is not None else 0

    def said() -> list:
        """What the job's log said of this run's partition (an earlier test's broken partition, failing again
        in this process's compactor, counts in ``failures`` too, unlogged once it has failed three times)."""
        return [
            r
            for r in caplog.records
            if r.name == "rollscope.compaction"
            and "background compaction" in r.msg
            and str(directory) in r.getMessage()
        ]

    failed_before = failures()
    rl = attached(run_id="broken", segment_seconds=0.01, compact=True, compact_seconds=0.05)
    for i in range(30):
        with rl.rollout(f"r{i}"):
            pass
        assert rl.force_flush()
    deadline = time.time() + 20
    while not said() and time.time() < deadline:
        time.sleep(0.05)
    assert failures() > failed_before
    with rl.rollout("after"):
        pass
    assert rl.force_flush()
    assert rl.exporter.stats.snapshot()["spans_failed"] == 0
    # The job's log says why, in one line naming the file (no traceback for a file that is not a segment).
    assert said() and all(f"{bad} is not a readable Parquet segment" in r.getMessage() for r in said())
    assert not any(r.exc_info for r in said())


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
    rollscope("rm", "--store", store, "--run", "exp-2")
    assert rollscope("runs", "--store", store) == (0, f"no runs in {store} yet\n", "")
    assert rollscope("runs", "--store", store, "--format", "json") == (0, "[]\n", "")


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
    layout.compact(store, "ext")  # replaced segments stay on disk for the grace period, aside
    assert len(list((live_partition(store, "ext") / layout.REPLACED_DIR).glob("seg-*"))) == 40
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
    # Replaced files are aside: globbing the partitions counts each span once, as the documented rule does
    # (which stays exact in the second after a merge, when its sources are still beside it).
    assert (every_file, once) == (40, 40)


def test_a_command_that_loses_its_files_to_a_compaction_asks_again_on_a_new_listing(attached, store):
    """`rollscope report`, `check` and `advise` list the run's files once; a compaction that deletes one it
    listed (its grace period over) fails the first attempt whole, and the command answers after a new listing
    (``Reader.retrying``, which the dashboard's figures go through too)."""
    import argparse

    from rollscope.app.commands._common import on_run
    from rollscope.queries import connect
    from rollscope.queries.report import report
    from tests.test_reader_incremental import publish_rollout

    rl = attached()
    for i in range(12):
        publish_rollout(rl, i)
    rl.shutdown()
    attempts = []

    def compute(con):
        attempts.append(con)
        if len(attempts) == 1:
            layout.compact(store, grace_seconds=0)  # what this connection listed is gone
        return report(con, "exp-7")

    figures = on_run(argparse.Namespace(store=str(store), run="exp-7"), compute)
    assert len(attempts) == 2
    assert figures == report(connect(store, run_id="exp-7"), "exp-7")
    assert figures["funnel"]["dispatched"] == 12


@pytest.mark.long  # retries paced by design
def test_a_command_that_keeps_losing_its_files_tries_a_few_listings_then_says_so_in_one_line(
    attached, store, monkeypatch
):
    """A busy machine under a short grace period: the files each attempt listed are compacted away before it
    reads them, again and again (the concurrency test's `check` lost twice in a row once). The command tries
    on a new listing each time; while one attempt in five succeeds it answers; if none does, one line."""
    import argparse

    from rollscope.app.commands._common import on_run
    from rollscope.errors import StoreError
    from rollscope.queries.reader import _RETRIES
    from rollscope.store import compaction
    from tests.test_reader_incremental import publish_rollout

    monkeypatch.setattr(compaction, "RETIRE_AFTER_S", 0.0)  # sources move at once: nine compactions, not 9 s
    rl = attached()
    attempts = []

    def compute(con, lose: int):
        attempts.append(con)
        if len(attempts) <= lose:
            publish_rollout(rl, 100 + len(attempts))  # a writer keeps publishing
            rl.force_flush()
            layout.compact(store, grace_seconds=0)  # and what this attempt listed is gone
        return con.execute("SELECT count(*) FROM spans WHERE name = 'rl.rollout'").fetchone()[0]  # raw files

    for i in range(4):
        publish_rollout(rl, i)
    rl.force_flush()
    args = argparse.Namespace(store=str(store), run="exp-7")
    rollouts = on_run(args, lambda con: compute(con, lose=_RETRIES - 1))
    assert len(attempts) == _RETRIES and rollouts == 4 + _RETRIES - 1
    attempts.clear()
    with pytest.raises(StoreError, match=rf"^IO Error: .* \({_RETRIES} attempts, each on a new listing"):
        on_run(args, lambda con: compute(con, lose=_RETRIES))
    assert len(attempts) == _RETRIES
    rl.shutdown()
