"""Catching up a live run costs what is new, not the run: an append's catch-up at 1M and 10M spans.

Per size, a run built as ``benchmarks/scale.py`` builds it (the shipped sample run repeated end to end, under
``--root``, kept between runs of the benchmark), then, each figure in a child process of its own (peak RSS is
the child's ``VmHWM``):

* **full** (the baseline, same run of the benchmark): the first open of the run with no derived state, which
  derives every table from every span (``queries.derive.derive_full``).
* **+1k spans**: the next ~1,000 spans a live run would write (the next copy's first spans in the order they
  end) published as one segment, then the open that catches up.
* **+1 step**: the rest of what the run writes until its next train step ends (that step's rollouts, rewards,
  samples and the train step), published as one segment, then the open that catches up.

Each append is caught up twice from the same state (the manifest is put back in between): first binding
every definition as a catch-up did before the manifest kept the tables' schemas (``bound``: the same-run
baseline of the fixed cost ``queries.derive._connection`` saves), then as it does now. Each catch-up must be
incremental (the manifest says how it was derived; the benchmark fails otherwise). The target: the appends'
catch-up about the same at every size (flat) and far below the full derivation.

``--keep-derived`` reuses a run's derived state when it holds exactly the built segments (a full derivation at
10M spans takes minutes): the full figure is then left out.

Usage: python -m benchmarks.catch_up [--sizes 1000000 10000000] [--root /tmp/incr-scale] [--keep-derived]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from benchmarks.scale import REPEAT, RUN, build, child, gib, repeat_params


def next_spans(store: Path):
    """The spans of the copy of the sample run that continues the store's run, in the order they end."""
    import duckdb

    from rollscope.store import layout

    con = duckdb.connect(config={"memory_limit": "2GB", "threads": 2})
    base, params = repeat_params(con)
    held = sum(_rows(p) for p in layout.segments(store, "spans", RUN))
    k = round(held / base)
    params = {**params, "lo": k, "hi": k + 1}
    return con.sql(REPEAT, params=params).to_arrow_table().sort_by("end_ns")


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def appends(spans, small: int = 1000):
    """The ~1k-span append and the one-step append that follows it."""
    import pyarrow.compute as pc

    steps = spans.filter(pc.equal(spans["name"], "rl.train_step"))
    first_end = pc.min(steps["end_ns"]).as_py()
    upto = pc.sum(pc.less_equal(spans["end_ns"], first_end)).as_py()
    return spans.slice(0, small), spans.slice(small, max(0, upto - small))


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
    small, step = appends(next_spans(store))
    writer, published = SegmentWriter(store), []
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--root", type=Path, default=Path("/tmp/incr-scale"))
    parser.add_argument("--segment-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--keep-derived", action="store_true", help="reuse a current derived state: no full derivation"
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


if __name__ == "__main__":
    raise SystemExit(main())
