"""Catching up a live run costs what is new, not the run: an append's catch-up at 1M and 10M spans.

Per size, a run built as ``benchmarks/scale.py`` builds it (the shipped sample run repeated end to end, under
``--root``, kept between runs of the benchmark), then, each figure in a child process of its own (peak RSS is
the child's ``VmHWM``):

* **full** (the baseline, same run of the benchmark): the first open of the run with no derived state, which
  derives every table from every span (``queries.derive.derive_full``).
* **+1k first**: the next ~1,000 spans a live run would write (the next copy's first spans in the order they
  end) published as one segment, then the open that catches up (the first incremental catch-up after a full
  derivation: it also consolidates the full derivation's one part per block).
* **+1k spans**: the next ~1,000 spans, the same way (steady state).
* **+1 step**: the rest of what the run writes until its next train step ends (that step's rollouts, rewards,
  samples and the train step), published as one segment, then the open that catches up.

Each append is caught up twice from the same state (the manifest is put back in between): first binding
every definition as a catch-up did before the manifest kept the tables' schemas (``bound``: the same-run
baseline of the fixed cost ``queries.derive_db.connection`` saves), then as it does now. Each catch-up must be
incremental (the manifest says how it was derived; the benchmark fails otherwise). The target: the appends'
catch-up about the same at every size (flat) and far below the full derivation.

``--keep-derived`` reuses a run's derived state when it holds exactly the built segments (a full derivation at
10M spans takes minutes): the full figure is then left out.

**Keeping up with a live run** (``--live``, on the largest size): the next ``--live-spans`` spans the run would
write (1M: the next copies of the sample run, in the order they end) are published by a writer thread at a
given rate, a segment every ``SEGMENT_S`` seconds as a writer publishes them, while a reader of the run (as
the dashboard's) catches up again and again. A segment is live when a catch-up that listed it has finished: its
lag is that moment less its publishing. For each rate of ``--live-rates`` (spans a second), the largest and
the 95th-percentile lag; the figure is the highest rate whose every segment was live within ``LAG_S`` (10 s)
of being published: the spans a second one process keeps up with. The segments are written beforehand and
appear by a rename at their time, as a fleet's segments written on other machines appear on a shared
filesystem (``--live-writer thread``: written at their time by a thread of the reader's own process).

Usage: python -m benchmarks.catch_up [--sizes 1000000 10000000] [--root /tmp/incr-scale] [--keep-derived]
       [--live] [--live-spans 1000000] [--live-rates 25000 50000 100000] [--live-writer arriving|thread]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from pathlib import Path

from benchmarks.scale import REPEAT, RUN, build, child, gib, repeat_params


def next_spans(store: Path, copies: int = 1):
    """The spans of the copies of the sample run that continue the store's run, in the order they end."""
    import duckdb

    from rollscope.store import layout

    con = duckdb.connect(config={"memory_limit": "2GB", "threads": 2})
    base, params = repeat_params(con)
    held = sum(_rows(p) for p in layout.segments(store, "spans", RUN))
    k = round(held / base)
    params = {**params, "lo": k, "hi": k + copies}
    return con.sql(REPEAT, params=params).to_arrow_table().sort_by("end_ns")


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def appends(spans, small: int = 1000):
    """Two ~1k-span appends and the one-step append that follows them."""
    import pyarrow.compute as pc

    after = spans.slice(2 * small)
    steps = after.filter(pc.equal(after["name"], "rl.train_step"))
    next_end = pc.min(steps["end_ns"]).as_py()
    upto = pc.sum(pc.less_equal(after["end_ns"], next_end)).as_py()
    return spans.slice(0, small), spans.slice(small, small), after.slice(0, upto)


def manifest(store: Path) -> Path:
    return store / "derived" / f"run_id={RUN}" / "manifest.json"


def how(store: Path) -> str:
    return json.loads(manifest(store).read_text())["how"]


def measure(store: Path, keep: bool) -> dict:
    from rollscope.store import derived
    from rollscope.store.layout import SegmentWriter

    out = {}
    if not (keep and derived.current(store, RUN) is not None):
        shutil.rmtree(store / "derived", ignore_errors=True)
        out["full"] = child("catch_up", store)
        assert how(store) == "full"
    original = manifest(store).read_text()
    first, small, step = appends(next_spans(store))
    writer = SegmentWriter(store)
    # The first catch-up after a full derivation consolidates its one part per block (tier by tier): timed once.
    published = [writer.publish(RUN, first)]
    out["+1k first"] = {**child("catch_up", store), "spans": first.num_rows, "how": how(store)}
    for label, table in (("+1k spans", small), ("+1 step", step)):
        published.append(writer.publish(RUN, table))
        before = manifest(store).read_text()
        unkept = json.loads(before)
        unkept["meta"].pop("schemas", None)
        manifest(store).write_text(json.dumps(unkept))
        out[f"{label} bound"] = {**child("catch_up", store), "spans": table.num_rows, "how": how(store)}
        manifest(store).write_text(before)  # the same state again: its parts are retired, not yet deleted
        out[label] = {**child("catch_up", store), "spans": table.num_rows, "how": how(store)}
        assert out[label]["how"] == out[f"{label} bound"]["how"] == "incremental", out
    for segment in published:  # the built run and its derived state again, for --keep-derived next time
        segment.unlink()
    manifest(store).write_text(original)
    return out


SEGMENT_S = 2.0  # a writer publishes a segment every ROLLSCOPE_SEGMENT_SECONDS (default 2)
LAG_S = 10.0  # live: every segment caught up within this many seconds of being published


def live(store: Path, spans, rate: float, arriving: bool = True) -> dict:
    """Publish ``spans`` at ``rate`` spans a second while a reader catches up in a loop (module docstring);
    the published segments are removed after, so each rate starts from the same run.

    ``arriving``: the segments are written beforehand and each appears, at its time, by a rename into the
    run's partition, as the segments of a fleet's writers on other machines appear on a shared filesystem:
    the reader's own work is what is measured. Otherwise a writer thread of this process writes each one at
    its time (on two cores the Parquet writing then takes its share of the reader's CPU and of its GIL)."""
    from rollscope.queries.reader import Reader
    from rollscope.store.layout import SegmentWriter, partition_dir

    reader = Reader(store, run_id=RUN)  # up to date: the run's derived state is current
    original = manifest(store).read_text()
    per = max(1, int(rate * SEGMENT_S))
    pieces = [spans.slice(offset, per) for offset in range(0, spans.num_rows, per)]
    staging = store.parent / f".{store.name}-arriving"
    shutil.rmtree(staging, ignore_errors=True)
    written = [SegmentWriter(staging).publish(RUN, piece) for piece in pieces] if arriving else []
    writer, partition = SegmentWriter(store), partition_dir(store, "spans", RUN)
    published: list[tuple[Path, float]] = []
    done = threading.Event()

    def publish(i: int) -> Path:
        if not arriving:
            return writer.publish(RUN, pieces[i])
        written[i].rename(partition / written[i].name)
        return partition / written[i].name

    def write() -> None:
        start = time.monotonic()
        for i in range(len(pieces)):
            time.sleep(max(0.0, start + i * SEGMENT_S - time.monotonic()))
            published.append((publish(i), time.monotonic()))
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    caught: dict[str, float] = {}  # segment name -> when a catch-up that listed it finished
    hows: dict[str, int] = {}
    while not (done.is_set() and len(caught) == len(published)):
        listed = [p.name for p, _ in list(published)]
        before = dict(reader.derived_how)
        reader.refresh()
        finished = time.monotonic()
        for name in listed:
            caught.setdefault(name, finished)
        for how, n in reader.derived_how.items():
            hows[how] = hows.get(how, 0) + n - before.get(how, 0)
        if not listed:
            time.sleep(0.05)
    thread.join()
    lags = sorted(caught[p.name] - at for p, at in published)
    for path, _ in published:
        path.unlink()
    shutil.rmtree(staging, ignore_errors=True)
    manifest(store).write_text(original)  # the same state again: its parts are retired, not yet deleted
    return {
        "rate": rate,
        "segments_from": "arriving (written beforehand)"
        if arriving
        else "a writer thread of the reader's process",
        "spans": spans.num_rows,
        "segments": len(published),
        "max_lag_s": lags[-1],
        "p95_lag_s": lags[int(0.95 * (len(lags) - 1))],
        "catch_ups": hows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--root", type=Path, default=Path("/tmp/incr-scale"))
    parser.add_argument("--segment-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--keep-derived", action="store_true", help="reuse a current derived state: no full derivation"
    )
    parser.add_argument(
        "--live", action="store_true", help="measure keeping up with a live run (the largest size)"
    )
    parser.add_argument("--live-spans", type=int, default=1_000_000, help="spans written live (default 1M)")
    parser.add_argument(
        "--live-rates",
        type=float,
        nargs="+",
        default=[25_000, 50_000, 100_000],
        help="spans a second written",
    )
    parser.add_argument(
        "--live-writer",
        choices=("arriving", "thread"),
        default="arriving",
        help="segments written beforehand and renamed in at their time, as a remote fleet's arrive (default), "
        "or written at their time by a thread of the reader's process",
    )
    args = parser.parse_args()
    results = {}
    for size in args.sizes:
        store = args.root / f"run-{size}"
        marker = store / ".built"
        if not marker.exists():
            shutil.rmtree(store, ignore_errors=True)
            rows, seconds = build(store, size, args.segment_rows)
            print(f"built {rows:,} spans in {seconds:.0f} s: {store}", flush=True)
            marker.write_text(str(rows))
        else:  # drop what an earlier run of the benchmark appended
            from rollscope.store import layout

            for seg in layout.segments(store, "spans", RUN):
                if seg.stat().st_mtime > marker.stat().st_mtime:
                    seg.unlink()
        results[size] = measure(store, args.keep_derived)
        print(json.dumps({size: results[size]}), flush=True)
    if args.live:
        _report_live(args)
    print(f"\nload average {os.getloadavg()[0]:.1f} ({time.strftime('%H:%M')})")
    print(
        f"{'spans':>12} | {'what':<16} | {'new spans':>9} | {'seconds':>8} | {'× full':>7} | {'× bound':>7} | "
        f"{'peak RSS':>9} | how"
    )
    for size, out in results.items():
        full = out["full"]["seconds"] if "full" in out else None
        for label, r in out.items():
            bound = out.get(f"{label} bound")
            x_full = f"{r['seconds'] / full:.3f}" if full else "-"
            x_bound = f"{r['seconds'] / bound['seconds']:.3f}" if bound else "-"
            print(
                f"{size:>12,} | {label:<16} | {r.get('spans', size):>9,} | {r['seconds']:>8.2f} | "
                f"{x_full:>7} | {x_bound:>7} | {gib(r['rss_bytes']):>9} | {r.get('how', 'full')}"
            )
    return 0


def _report_live(args) -> None:
    """Keeping up with a live run at each rate, on the largest size's run; the highest rate kept within LAG_S."""
    from benchmarks.scale import repeat_params

    store = args.root / f"run-{max(args.sizes)}"
    import duckdb

    base, _ = repeat_params(duckdb.connect())
    spans = next_spans(store, max(1, round(args.live_spans / base)))
    kept = []
    for rate in sorted(args.live_rates):
        out = live(store, spans, rate, arriving=args.live_writer == "arriving")
        print(json.dumps(out), flush=True)
        if out["max_lag_s"] <= LAG_S:
            kept.append(rate)
    figure = (
        f"{max(kept):,.0f} spans a second" if kept else f"under {min(args.live_rates):,.0f} spans a second"
    )
    print(
        f"\nlive: {spans.num_rows:,} spans appended to a {max(args.sizes):,}-span run, kept within {LAG_S:.0f} s "
        f"of live at up to {figure} (segments {out['segments_from']})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
