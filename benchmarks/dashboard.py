"""Dashboard speed on a large store: each page's render time, and the cost of one live refresh.

Builds (or reuses, with ``--store``) a store of about ``--spans`` spans of one run, written through
``attach()`` by ``--workers`` processes as a job would, plus a small second run for the Compare page. Then:

1. initial load: opening the run (catching up its derived state on disk, what the first open pays);
2. per page: one render in Streamlit's AppTest, on the warm Reader with the result caches cleared (what a
   user waits for when new data has arrived and every figure is recomputed);
3. live refresh: for each of ``--new-spans`` (default 1k, 10k, 100k), a writer publishes about that many more
   spans, then ``Reader.refresh()`` reads them. Each cost is printed against the initial load and against a
   refresh that found nothing new (the baselines, measured in the same run), and per 1,000 new spans: a
   refresh proportional to new data keeps that last figure flat as the batch grows.

Usage: python benchmarks/dashboard.py [--spans 10000000] [--new-spans 1000 10000 100000] [--store DIR]
       [--workers N] [--pages [PAGE ...]]   (``--pages`` alone: no page renders, only the refreshes)
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fixtures.seeded_runs import RunWriter, write_run  # noqa: E402
from rollscope.app import pages as app_pages  # noqa: E402
from rollscope.queries import analyses  # noqa: E402
from rollscope.store import layout  # noqa: E402
from rollscope.store.layout import segments  # noqa: E402

RUN = "bench"
PAGES = tuple(page.slug for page in app_pages.PAGES)
GROUPS_PER_STEP = 64


def _write_share(args: tuple[str, int, int, int]) -> int:
    """One worker process: rollout groups step after step until it has written its share of spans."""
    store, worker, workers, target = args
    writer = RunWriter(Path(store), RUN, seed=worker, prefix=f"w{worker}-", trainer=worker == 0)
    written = 0
    while written < target // workers:
        writer.write_step(groups=GROUPS_PER_STEP)
        written = sum(rl.stats["spans_received"] for rl in writer.processes())
    writer.shutdown()
    return sum(rl.stats["spans_exported"] for rl in writer.processes())


def build(store: Path, spans: int, workers: int) -> int:
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        written = sum(pool.map(_write_share, [(str(store), w, workers, spans) for w in range(workers)]))
    write_run(store, "bench-small", seed=11, steps=5)
    print(f"built {written:,} spans in {time.perf_counter() - started:.0f} s with {workers} workers")
    return written


def span_rows(store: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in segments(store, "spans"))


def filters(store: Path, run: str = RUN):
    """The sidebar's default choices for ``run`` (every step, every environment, live off)."""
    from rollscope.app.filters import Filters

    return Filters(str(store), run, tuple(layout.run_ids(store)), None, None, None)


def render(store: Path, page: str) -> tuple[float, float]:
    """Seconds of one run of the page alone (its sidebar is timed apart) with cached results cleared (cold),
    then of a second run that finds them cached (warm: a revisit, or a refresh that found nothing new)."""
    import streamlit as st

    from benchmarks.fixtures.app_test import app_test
    from rollscope.app.filters import FILTERS

    at = app_test(ROOT / "app" / "screens" / f"{page}.py", 1200)
    at.session_state["store"] = str(store)
    at.session_state[FILTERS] = filters(store)
    st.cache_data.clear()
    cold, _ = timed(at.run)
    assert not at.exception and not at.error, (page, [e.value for e in [*at.exception, *at.error]])
    warm, _ = timed(at.run)
    return cold, warm


def sidebar_seconds(store: Path) -> float:
    """The sidebar's own queries: the run's step range and environments."""
    import streamlit as st

    from rollscope.app import calls

    st.cache_data.clear()
    started = time.perf_counter()
    calls.call(str(store), analyses.steps, RUN)
    calls.call(str(store), analyses.environments, RUN)
    return time.perf_counter() - started


def last_end_ns(reader) -> int:
    """The end of the run's last span (0 when it has none)."""
    return reader.con.execute(
        "SELECT coalesce(max(end_ns), 0) FROM raw_spans WHERE run_id = ?", [RUN]
    ).fetchone()[0]


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def live_refresh(store: Path, reader, writer, target: int, load_s: float) -> None:
    """Publish about ``target`` new spans as a live job would, then time the refresh that reads them."""
    before = span_rows(store)
    while span_rows(store) - before < target:
        writer.write_step(groups=max(1, min(GROUPS_PER_STEP, target // 150)))
        writer.flush()
    new = span_rows(store) - before
    derivations, kinds = dict(reader.derivations), dict(reader.derived_how)
    refresh_s, added = timed(reader.refresh)
    how = {k: v - derivations.get(k, 0) for k, v in reader.derivations.items() if v != derivations.get(k, 0)}
    # and of those derived, how: "full" or "incremental"
    how |= {k: v - kinds.get(k, 0) for k, v in reader.derived_how.items() if v != kinds.get(k, 0)}
    print(
        f"live refresh after {new:>7,} new spans ({added} segments, {new / (before + new):.3%} of the store, "
        f"derived {how}): {refresh_s:.3f} s = {refresh_s / load_s:.4f} × initial load, "
        f"{refresh_s / new * 1000:.3f} s per 1,000 new spans",
        flush=True,
    )


def main() -> int:
    logging.disable(logging.WARNING)  # AppTest and caches outside a server warn about it on every run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000_000)
    parser.add_argument("--new-spans", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--store", type=Path, help="reuse (or build into) this store")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--build-only", action="store_true", help="build the store and stop")
    parser.add_argument(
        "--pages", nargs="*", choices=PAGES, default=PAGES, help="pages to render (default all)"
    )
    args = parser.parse_args()
    store = args.store or Path(tempfile.mkdtemp(prefix="rollscope-bench-")) / "store"
    if not segments(store, "spans"):
        build(store, args.spans, args.workers)
        if args.build_only:
            return 0
    rows = span_rows(store)
    print(f"store {store}: {rows:,} spans in {len(segments(store, 'spans'))} segments")

    from rollscope.app import readers

    load_s, live = timed(lambda: readers.live_store(str(store)).reader(RUN))
    live = readers.live_store(str(store))
    print(f"initial load (open the run, catching up its derived state): {load_s:.2f} s")

    print(f"sidebar (step range, environments): {sidebar_seconds(store):.2f} s")
    print("page render (AppTest, warm reader, result caches cleared); target ≤ 1 s:")
    for page in args.pages:
        cold, warm = render(store, page)
        print(
            f"  {page:<15} cold {cold:7.2f} s = {cold / load_s:6.3f} × initial load;  warm {warm:5.2f} s",
            flush=True,
        )

    idle_s, _ = timed(live.reader(RUN).refresh)  # the baseline: a refresh that finds nothing new
    print(f"live refresh with nothing new: {idle_s * 1000:.1f} ms")
    # Fresh rollout ids each time, as a running job makes (the store keeps every earlier benchmark's).
    writer = RunWriter(store, RUN, seed=99, prefix=f"live{time.time_ns():x}-", trainer=False)
    # The job goes on where the run stands: its next step, from its last span's end on (a writer starting at
    # its own clock would write spans years before the run's, which no live job does, and which makes every
    # catch-up sweep the run's whole time: rollout_goodput's step windows, compute_busy's union).
    writer.step = analyses.steps(live.reader(RUN).con, RUN)[1] + 1
    writer.clock = max(writer.clock, last_end_ns(live.reader(RUN)) + 60 * 10**9)
    for target in args.new_spans:
        live_refresh(store, live.reader(RUN), writer, target, load_s)
    writer.shutdown()
    if "overview" in args.pages:
        print(f"Overview re-render after those refreshes: {render(store, 'overview')[0]:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
