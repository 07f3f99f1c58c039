"""A run of many small segments: writers that exit leave them merged, and a reader that derives such a run
merges them first, with compaction's guarantees (every span once, sources moved aside for slow readers)."""

from __future__ import annotations

import os
import subprocess
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.fixtures.derived_rows import derived
from rollscope.queries import Reader
from rollscope.store import compaction, layout
from rollscope.store import derived as store_derived
from tests.conftest import python
from tests.simulated_runs import simulated
from tests.test_compaction import listed, live_partition, read_listing
from tests.test_reader_incremental import fresh, stored_spans

RUN = "samples"

# A sandbox or judge worker that flushes after every rollout and exits without shutting rollscope down: its
# segments are merged by the exit hook (compaction's, then the SDK's provider shutdown).
SHORT_LIVED = """
import sys
from rollscope.collectors import attach
from rollscope.store import compaction
compaction.FINAL_MERGE_S = 30.0  # a loaded test machine: the bound itself is the next test's
rl = attach(store=sys.argv[1], run_id="short", segment_seconds=0.001, compact_seconds=3600, set_global=False)
for i in range(int(sys.argv[2])):
    with rl.rollout(f"{sys.argv[3]}-{i}", task_id=f"t{i % 5}", environment="swe"):
        pass
    rl.force_flush()
print("published", flush=True)
"""


def tiny_segments(spans: pa.Table, store, run: str, per: int, compact_seconds: float | None = None) -> int:
    """``spans`` published ``per`` at a time, as a worker flushing after every few spans does."""
    writer = layout.SegmentWriter(store, "spans", compact_seconds=compact_seconds)
    for start in range(0, spans.num_rows, per):
        writer.publish(run, spans.slice(start, per))
    return -(-spans.num_rows // per)


@pytest.fixture(autouse=True)
def own_segments(monkeypatch):
    """This test's record of what "this process" wrote: the segments earlier tests on the same pytest worker
    published (other stores) are not a writer's to merge here (they made the last-merge tests count 1 or 2
    merges where none was due, in the full suite only)."""
    monkeypatch.setattr(compaction, "WRITTEN", compaction.Written())


@pytest.fixture
def compacting(monkeypatch):
    """Merging on (tests turn it off by default: conftest), with no listing in flight to wait a second for."""
    monkeypatch.setenv("ROLLSCOPE_COMPACT", "1")


@pytest.mark.long  # writer processes
def test_writers_that_exit_leave_their_segments_merged_every_span_once(store, compacting):
    env = {**os.environ, "ROLLSCOPE_COMPACT": "1"}
    writers = [
        python(SHORT_LIVED, str(store), "150", f"w{w}", env=env, stdout=subprocess.PIPE, text=True)
        for w in range(4)
    ]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    directory = live_partition(store, "short")
    published = len(list(directory.glob("seg-*"))) + len(
        list((directory / layout.REPLACED_DIR).glob("seg-*"))
    )
    assert published >= 4 * 150  # a segment per rollout, at least
    live = layout.segments(store, "spans", "short")
    assert (
        len(live) <= 4 * 2
    )  # each writer's last merge, and a segment its exporter's shutdown published after
    assert listed(directory) == len(live)  # the merged files' sources are aside, not listed
    rows, distinct = read_listing(duckdb.connect(), live)
    assert rows == distinct == 4 * 150  # every rollout's span once
    assert int(Reader(store).sql("SELECT count(*) AS n FROM rollouts").n[0]) == 4 * 150


def test_a_writers_last_merge_waits_a_bounded_time_for_the_lock_and_leaves_its_segments_readable(store):
    directory = live_partition(store, "short")
    spans = pa.table({"span_id": pa.array(range(40), pa.uint64()), "name": pa.array(["s"] * 40)})
    tiny_segments(spans, store, "short", 2, compact_seconds=3600)
    with compaction.partition_lock(directory, wait=False) as held:
        assert held  # another compactor holds the partition: the writer's exit must not wait for it
        started = time.monotonic()
        assert compaction.final_merge(seconds=0.5) == 0
        assert time.monotonic() - started < 1.5
    assert len(layout.segments(store, "spans", "short")) == 20
    assert compaction.final_merge(seconds=30) == 1  # room for the moves on a loaded machine
    live = layout.segments(store, "spans", "short")
    assert len(live) == 1 and listed(directory) == 1
    assert sorted(pq.read_table(live[0])["span_id"].to_pylist()) == list(range(40))
    assert compaction.final_merge() == 0  # nothing of this process's is left unmerged


def test_a_writers_last_merge_leaves_alone_what_another_compactor_merged(store, monkeypatch):
    monkeypatch.setattr(compaction, "RETIRE_AFTER_S", 0.0)
    directory = live_partition(store, "short")
    spans = pa.table({"span_id": pa.array(range(60), pa.uint64()), "name": pa.array(["s"] * 60)})
    tiny_segments(spans.slice(0, 30), store, "short", 3, compact_seconds=3600)
    other = layout.SegmentWriter(store, "spans")  # another process's segments, merged by its compactor
    other.publish("short", spans.slice(30, 30))
    compaction.compact_partition(directory, mode="full", grace_seconds=300)
    tiny_segments(spans.slice(0, 0), store, "short", 1)
    assert compaction.final_merge() == 0
    ids = sorted(
        i for f in layout.segments(store, "spans", "short") for i in pq.read_table(f)["span_id"].to_pylist()
    )
    assert ids == list(range(60))


@pytest.mark.long
def test_a_reader_merges_a_run_of_many_small_segments_first_and_derives_what_a_fresh_reader_does(
    tmp_path, monkeypatch
):
    source, _ = simulated(RUN)
    spans = stored_spans(source, RUN)
    store = tmp_path / "store"
    published = tiny_segments(spans, store, RUN, per=spans.num_rows // 300 + 1)
    expected = derived(fresh(store), RUN)  # merging off (conftest): derived from the 300 segments themselves
    monkeypatch.setenv("ROLLSCOPE_COMPACT", "1")
    reader = Reader(store, run_id=RUN)
    live = layout.segments(store, "spans", RUN)
    assert published >= layout.GATHER_FILES and len(live) == 1 and live[0].name.startswith("cmp-")
    assert reader.segment_count() == 1  # its raw views read the merged file, listed after the catch-up
    assert store_derived.current(store, RUN).segments == {live[0].name}
    assert derived(reader, RUN) == expected
    directory = live_partition(store, RUN)
    assert listed(directory) == 1  # the sources moved aside once the catch-up was done
    assert len(list((directory / layout.REPLACED_DIR).glob("seg-*"))) == published  # kept for slow readers
    rows, distinct = read_listing(duckdb.connect(), live)
    assert rows == distinct == spans.num_rows


@pytest.mark.long
def test_a_reader_merges_only_the_new_small_segments_of_a_run_it_derived(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLSCOPE_COMPACT", "1")
    source, _ = simulated(RUN)
    spans = stored_spans(source, RUN)
    store = tmp_path / "store"
    half = spans.num_rows // 2
    before = tiny_segments(spans.slice(0, half), store, RUN, per=half // 20 + 1)  # under GATHER_FILES
    reader = Reader(store, run_id=RUN)
    first = store_derived.current(store, RUN).segments
    assert len(first) == before  # derived as they are
    assert tiny_segments(spans.slice(half), store, RUN, per=8) >= layout.GATHER_FILES
    reader.refresh()
    live = {p.name for p in layout.segments(store, "spans", RUN)}
    assert first < live and len(live - first) == 1  # the new ones merged, the derived ones left alone
    assert derived(reader, RUN) == derived(fresh(store), RUN)


GATHERING_READER = """
import sys
from rollscope.queries import Reader
Reader(sys.argv[1], run_id="r")
"""


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_readers_listing_during_a_readers_merge_see_every_span_once(store, compacting):
    spans = pa.table(
        {
            "span_id": pa.array(range(3000), pa.uint64()),
            "name": pa.array(["rl.rollout"] * 3000),
            "start_ns": pa.array(range(3000), pa.int64()),
            "end_ns": pa.array(range(1, 3001), pa.int64()),
        }
    )
    tiny_segments(spans, store, "r", 2)
    env = {**os.environ, "ROLLSCOPE_COMPACT": "1"}
    merging = python(GATHERING_READER, str(store), env=env)
    con, seen = duckdb.connect(), []
    while merging.poll() is None or not seen:
        seen.append(read_listing(con, layout.segments(store, "spans", "r")))
    assert merging.wait(timeout=120) == 0
    assert set(seen) == {(3000, 3000)}  # no duplicates, no gaps, whenever the listing was taken
    assert len(layout.segments(store, "spans", "r")) == 1


@pytest.mark.long
def test_compact_0_leaves_a_readers_run_of_small_segments_as_it_is(tmp_path):
    store = tmp_path / "store"
    source, _ = simulated(RUN)
    published = tiny_segments(stored_spans(source, RUN), store, RUN, per=20)
    assert published >= layout.GATHER_FILES
    Reader(store, run_id=RUN)  # ROLLSCOPE_COMPACT=0 (conftest): a host that must not compact this store
    assert len(layout.segments(store, "spans", RUN)) == published
    assert not list(live_partition(store, RUN).glob("cmp-*"))


def test_a_writers_compactor_merges_its_own_segments_and_leaves_anothers_young_ones_to_it(store, monkeypatch):
    monkeypatch.setattr(compaction, "RETIRE_AFTER_S", 0.0)
    directory = live_partition(store, "r")
    spans = pa.table({"span_id": pa.array(range(64), pa.uint64()), "name": pa.array(["s"] * 64)})
    tiny_segments(spans.slice(0, 32), store, "r", 2, compact_seconds=3600)  # this process's: in memory
    tiny_segments(spans.slice(32, 32), store, "r", 2)  # as another process's writer would leave them
    compaction.compact_partition(directory, grace_seconds=0, patience=30.0)
    live = layout.segments(store, "spans", "r")
    merged = [f for f in live if f.name.startswith("cmp-")]
    assert len(merged) == 1 and pq.read_metadata(merged[0]).num_rows == 32  # its own 16, from memory
    assert len(live) == 1 + 16  # the other's 16 young segments left to their writer
    compaction.compact_partition(directory, grace_seconds=0, patience=0.0)  # old enough now: merged too
    assert len(layout.segments(store, "spans", "r")) < 1 + 16
    ids = sorted(
        i for f in layout.segments(store, "spans", "r") for i in pq.read_table(f)["span_id"].to_pylist()
    )
    assert ids == list(range(64))
