"""Small segments never pile up: 64 writers publishing every 2 s, compacted by the writers' own compactor.

Two parts, both driving the real compaction code (``rollscope.store.compaction``):

1. **Real files, simulated clock.** The sample run, repeated ``--copies`` times (ids and times shifted), is cut
   into segments of ``--spans-per-segment`` spans and published by ``--writers`` real ``SegmentWriter``s, one
   segment per writer per simulated 2 s; every simulated ``--compact-seconds`` the background compactor's
   step (``compact_partition``, tiered) runs. Simulated: the clock (writes run back to back) and the grace
   period (replaced files are swept at the next step, not 300 s later). Every segment is also hard-linked into
   a second store that nobody compacts. Then ``rollscope sql "select count(*) from rollouts"`` (a fresh
   process, as a user runs it) is timed on the auto-compacted run, on the uncompacted one, and on the same
   spans after ``rollscope compact`` (the baseline).
2. **A simulated week.** The same publish pattern for ``--days`` days, with the same planner
   (``plan_tiered``) deciding every merge and a merge's cost taken from part 1 (a fit of seconds against files
   and rows merged); files are counters, not written. It prints the files a reader of the run opens (live) and
   lists (live plus replaced files kept for the 300 s grace period), and how busy the compactor is.
3. **Short-lived writers** (``--short-writers``, 8): separate processes, each publishing its share of the sample
   run's first ``--short-spans`` spans ``--short-per-segment`` at a time (a sandbox or judge worker flushing per
   rollout), as fast as it can, then exiting, their writers compacting as the exporter's do. Each segment is also
   hard-linked into a second store that nothing merges (writers killed before they could: the reader's case),
   and a copy of that one is compacted with `rollscope compact` (the baseline). `rollscope sql` is timed on each,
   first open and warm, with its peak RSS.

Usage: python -m benchmarks.segments [--copies 10] [--spans-per-segment 50] [--days 7] [--short-only]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rollscope.store import compaction, layout

RUN = "week"
QUERY = "select count(*) from rollouts"


# --- the spans ----------------------------------------------------------------------------------------------


def repeated_sample(copies: int) -> pa.Table:
    """The sample run ``copies`` times end to end, as ``benchmarks.scale`` builds its runs (each copy with its
    own ids, steps, versions and later times, so the copies form one longer run); in arrival (end) order."""
    import duckdb

    from benchmarks.scale import REPEAT, repeat_params

    con = duckdb.connect(config={"memory_limit": "2GB", "threads": 2})
    _, params = repeat_params(con)
    return con.sql(f"{REPEAT} ORDER BY end_ns", params={**params, "lo": 0, "hi": copies}).to_arrow_table()


# --- part 1: real files ------------------------------------------------------------------------------------


def publish_and_compact(spans: pa.Table, args, auto: Path, raw: Path) -> dict:
    """Publish the spans as the writers would, running the compactor's step on the simulated clock."""
    # The clock is simulated: sources move aside as soon as their merged file is published, not a second later.
    compaction.RETIRE_AFTER_S = 0.0
    writers = [layout.SegmentWriter(auto, "spans", prefix="seg") for _ in range(args.writers)]
    directory = layout.partition_dir(auto, "spans", RUN)
    raw_dir = layout.partition_dir(raw, "spans", RUN)
    raw_dir.mkdir(parents=True)
    per = args.spans_per_segment
    cuts = range(0, spans.num_rows, per)
    ticks_per_compaction = max(1, round(args.compact_seconds / 2.0))
    steps, timeline = [], []
    publish_s = compact_s = 0.0
    result = compaction.CompactResult()
    for i, start in enumerate(cuts):
        t0 = time.perf_counter()
        path = writers[i % args.writers].publish(RUN, spans.slice(start, per))
        publish_s += time.perf_counter() - t0
        os.link(path, raw_dir / path.name)
        tick, last_of_tick = divmod(i, args.writers)
        if last_of_tick != args.writers - 1 and i != len(cuts) - 1:
            continue
        if tick % ticks_per_compaction == ticks_per_compaction - 1 or i == len(cuts) - 1:
            before = (result.merges, result.rows, result.files_before, result.files_after)
            t0 = time.perf_counter()
            compaction.compact_partition(directory, grace_seconds=0, result=result)
            seconds = time.perf_counter() - t0
            compact_s += seconds
            merges = result.merges - before[0]
            files = (result.files_before - before[2]) - (result.files_after - before[3]) + merges
            steps.append((files, result.rows - before[1], seconds))
        if tick % 30 == 29 or i == len(cuts) - 1:  # every simulated minute
            live = layout.segments(auto, "spans", RUN)
            listed = sum(n.endswith(".parquet") for n in os.listdir(directory))
            footers = sum(f.name.startswith("cmp-") for f in live)
            timeline.append(
                (2 * (tick + 1), i + 1, min(start + per, spans.num_rows), len(live), listed, footers)
            )
    return {
        "published": len(cuts),
        "publish_s": publish_s,
        "compact_s": compact_s,
        "rows_rewritten": result.rows,
        "steps": steps,
        "timeline": timeline,
    }


def listing_cost(store: Path, repeats: int) -> dict:
    """What a reader pays to list the run: one directory listing plus the footer of each merged file (cached
    per process; cleared here, as a fresh `rollscope` process starts), against the listing alone."""
    directory = layout.partition_dir(store, "spans", RUN)
    listed, full, parsed = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        os.listdir(directory)
        listed.append(time.perf_counter() - t0)
        layout._sources_of.cache_clear()
        t0 = time.perf_counter()
        files = layout.segments(store, "spans", RUN)
        full.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for f in files:
            if f.name.startswith("cmp-"):
                pq.read_metadata(f)  # how the footers were read before: every row group's statistics parsed
        parsed.append(time.perf_counter() - t0)
    return {
        "files": len(files),
        "footers": sum(f.name.startswith("cmp-") for f in files),
        "listdir": statistics.median(listed),
        "segments": statistics.median(full),
        "parsed": statistics.median(parsed),
    }


def rollscope_sql(store: Path, repeats: int) -> tuple[float, str]:
    """Median wall time of `rollscope sql` in a fresh process, and its answer."""
    exe = Path(sys.executable).with_name("rollscope")
    times, answers = [], set()
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(
            [exe, "sql", "--store", store, QUERY], capture_output=True, text=True, check=True
        )
        times.append(time.perf_counter() - t0)
        answers.add(out.stdout.split()[-1])
    assert len(answers) == 1, answers
    return statistics.median(times), answers.pop()


def cost_model(steps: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Seconds per file and per row merged: least squares on part 1's steps, kept non-negative."""
    done = [(f, r, s) for f, r, s in steps if f]
    files, rows, seconds = (np.array(c, dtype=float) for c in zip(*done, strict=True))
    (per_file, per_row), *_ = np.linalg.lstsq(np.column_stack([files, rows]), seconds, rcond=None)
    if per_file >= 0 and per_row >= 0:
        return float(per_file), float(per_row)
    # One term alone: the one that fits better.
    only_files = (seconds.sum() / files.sum(), 0.0)
    only_rows = (0.0, seconds.sum() / rows.sum())
    error = {m: ((files * m[0] + rows * m[1] - seconds) ** 2).sum() for m in (only_files, only_rows)}
    return min(error, key=error.get)


# --- part 2: a simulated week ------------------------------------------------------------------------------


def simulate_week(args, per_file: float, per_row: float) -> list[tuple]:
    """The publish pattern for ``args.days`` days; the real planner picks every merge; files are counters.

    Listed, per layout: **now** (``.replaced/``) a partition holds the live files, and during a compaction
    step (its merges' time plus ``RETIRE_AFTER_S``, when the sources move aside) also the sources of its merges
    and the segments published meanwhile: the peak is the live files before the step, plus its merged files,
    plus those arrivals. **Before** (the baseline, same merges) replaced files stayed beside the live ones for
    the whole 300 s grace period."""
    rng = np.random.default_rng(7)
    live: list[compaction.Part] = []
    grace: deque[tuple[float, int]] = deque()  # (time a replaced batch may be deleted, how many files)
    in_grace = 0
    busy_until = busy_total = 0.0
    rows_total = rows_rewritten = 0
    report_at = [3600 * h for h in (1, 6, 12)] + [86_400 * d for d in range(1, args.days + 1)]
    rows_out, peak_live, peak_listed, peak_old = [], 0, 0, 0
    seconds = int(args.days * 86_400)
    for now in range(2, seconds + 1, 2):
        sizes = rng.poisson(args.spans_per_segment, args.writers).clip(1)
        rows_total += int(sizes.sum())
        ms = now * 1000
        live.extend(compaction.Part(f"seg-{ms:013d}-{w:02x}", int(n)) for w, n in enumerate(sizes))
        listed = len(live)
        if now % args.compact_seconds == 0 and now >= busy_until:
            while grace and grace[0][0] <= now:
                in_grace -= grace.popleft()[1]
            spent, before, merges = 0.0, len(live), 0
            while spent < 60.0 and (batch := compaction.plan_tiered(live)):
                names = {p.name for p in batch}
                merged = compaction.Part(f"cmp-{ms:013d}-{len(live):06d}", sum(p.rows for p in batch))
                live = [p for p in live if p.name not in names] + [merged]
                grace.append((now + compaction.REPLACED_GRACE_S, len(batch)))
                in_grace += len(batch)
                rows_rewritten += merged.rows
                merges += 1
                spent += per_file * len(batch) + per_row * merged.rows
            if merges:
                arrivals = math.ceil((spent + compaction.RETIRE_AFTER_S) / 2) * args.writers
                listed = before + merges + arrivals
            busy_until = now + spent
            busy_total += spent
        peak_live, peak_listed = max(peak_live, len(live)), max(peak_listed, listed)
        peak_old = max(peak_old, len(live) + in_grace)
        if report_at and now >= report_at[0]:
            report_at.pop(0)
            full = math.ceil(rows_total / layout.COMPACT_TARGET_ROWS)
            footers = sum(p.name.startswith("cmp-") for p in live)
            rows_out.append(
                (
                    now,
                    rows_total,
                    now // 2 * args.writers,
                    len(live),
                    peak_live,
                    footers,
                    peak_listed,
                    len(live) + in_grace,
                    peak_old,
                    full,
                    rows_rewritten / rows_total,
                    busy_total / now,
                )
            )
    return rows_out


# --- part 3: short-lived writers ----------------------------------------------------------------------------

SHORT_RUN = "short"
SHORT_WRITER = """
import sys, time
from benchmarks.segments import short_lived_writer
short_lived_writer(*sys.argv[1:])
"""


def short_lived_writer(
    spans_file: str, store: str, unmerged: str, index: str, writers: str, per: str
) -> None:
    """One worker: its share of the spans (every ``writers``-th piece of ``per``), published as fast as it can
    by a writer that compacts (as the exporter's), each segment hard-linked into ``unmerged``; then it exits,
    closing its writer as the exporter's shutdown does. Prints when it finished publishing."""
    spans = pq.read_table(spans_file)
    writer = layout.SegmentWriter(store, "spans", compact_seconds=10.0, dictionary=False)
    linked = layout.partition_dir(unmerged, "spans", SHORT_RUN)
    starts = range(int(index) * int(per), spans.num_rows, int(writers) * int(per))
    for start in starts:
        piece = spans.take(pa.array(range(start, min(start + int(per), spans.num_rows))))  # its own buffers
        os.link(path := writer.publish(SHORT_RUN, piece), linked / path.name)
    print(f"{len(starts)} {time.time()}", flush=True)
    writer.close()


def run_short_lived_writers(args, spans_file: Path, store: Path, unmerged: Path) -> dict:
    """The writers at once; what each published, how long they took, and how long each took to exit after."""
    layout.partition_dir(unmerged, "spans", SHORT_RUN).mkdir(parents=True)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHORT_WRITER, str(spans_file), str(store), str(unmerged), str(i)]
            + [str(args.short_writers), str(args.short_per_segment)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "ROLLSCOPE_COMPACT": "1"},
        )
        for i in range(args.short_writers)
    ]
    published, exits = 0, []
    for proc in procs:
        count, done_at = proc.stdout.read().split()
        assert proc.wait() == 0
        published += int(count)
        exits.append(time.time() - float(done_at))
    return {"published": published, "seconds": time.perf_counter() - started, "exits": exits}


# Runs a command and prints its peak RSS (KiB) last: a small process between the benchmark and `rollscope sql`,
# since a child's ru_maxrss starts from its parent's high-water mark (inherited across fork and exec), which here
# is the benchmark's own (the spans it held), not the reader's.
PEAK_RSS = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def timed_sql(store: Path) -> tuple[float, float, str]:
    """`rollscope sql` in a fresh process: wall seconds, peak RSS (GiB) and its answer."""
    exe = Path(sys.executable).with_name("rollscope")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, exe, "sql", "--store", store, QUERY],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - t0
    *out, peak_kib = proc.stdout.split()
    return seconds, int(peak_kib) / 2**20, out[-1]


def part3(args) -> None:
    spans = repeated_sample(1).slice(0, args.short_spans)
    with tempfile.TemporaryDirectory(prefix="rollscope-short-") as tmp:
        tmp = Path(tmp)
        spans_file = tmp / "spans.parquet"
        pq.write_table(spans, spans_file)
        stores = {"left": tmp / "left", "unmerged": tmp / "unmerged", "compacted": tmp / "compacted"}
        w = run_short_lived_writers(args, spans_file, stores["left"], stores["unmerged"])
        shutil.copytree(stores["unmerged"], stores["compacted"])
        layout.compact(stores["compacted"], SHORT_RUN, grace_seconds=0)
        files = {k: len(layout.segments(s, "spans", SHORT_RUN)) for k, s in stores.items()}
        print(
            f"\n## Part 3: {args.short_writers} short-lived writers, {spans.num_rows:,} spans"
            f" {args.short_per_segment} at a time: {w['published']:,} segments in {w['seconds']:.1f} s;"
            f" each exited {statistics.median(w['exits']):.2f} s (median, max {max(w['exits']):.2f} s) after"
            " its last segment, its last merge included"
        )
        results = {}
        for key in ("compacted", "left", "unmerged"):  # the baseline first
            first = timed_sql(stores[key])
            warm = [timed_sql(stores[key]) for _ in range(args.repeats)]
            results[key] = first, statistics.median(s for s, _, _ in warm), max(r for _, r, _ in warm)
        answers = {r[0][2] for r in results.values()}
        assert len(answers) == 1, answers
        base_first, base_warm = results["compacted"][0][0], results["compacted"][1]
        print(
            f'\n`rollscope sql "{QUERY}"` (answer {answers.pop()}), a fresh process each: the first open (no'
            f" derived state), then warm (median of {args.repeats}); peak RSS of each"
        )
        print(
            f"{'store':<42} {'files':>6} {'first s':>8} {'vs':>6} {'RSS GiB':>8}"
            f" {'warm s':>7} {'vs':>6} {'RSS GiB':>8}"
        )
        for label, key in (
            ("compacted by `rollscope compact` (baseline)", "compacted"),
            ("as the writers left it", "left"),
            ("never merged (writers killed): the reader merges", "unmerged"),
        ):
            (first_s, first_rss, _), warm_s, warm_rss = results[key]
            print(
                f"{label:<42} {files[key]:>6,} {first_s:>8.2f} {first_s / base_first:>5.2f}x {first_rss:>8.2f}"
                f" {warm_s:>7.2f} {warm_s / base_warm:>5.2f}x {warm_rss:>8.2f}"
            )
        print(
            "targets (issue 55): first open <= 3x the compacted copy's, peak RSS <= 2 GiB, warm <= 2x compacted"
        )


# --- output ------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10, help="times the sample run is repeated (part 1)")
    parser.add_argument("--spans-per-segment", type=int, default=50)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--compact-seconds", type=int, default=10, help="simulated seconds between steps")
    parser.add_argument("--days", type=int, default=7, help="simulated days (part 2)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each `rollscope sql`")
    parser.add_argument(
        "--skip-part1", action="store_true", help="only the simulated week (uses a default cost)"
    )
    parser.add_argument("--short-writers", type=int, default=8, help="short-lived writer processes (part 3)")
    parser.add_argument("--short-spans", type=int, default=80_000, help="spans they publish (part 3)")
    parser.add_argument("--short-per-segment", type=int, default=7, help="spans a segment (part 3)")
    parser.add_argument("--short-only", action="store_true", help="only part 3, the short-lived writers")
    args = parser.parse_args()
    if args.short_only:
        part3(args)
        return 0
    print(
        f"# {args.writers} writers, each publishing one segment of ~{args.spans_per_segment} spans every 2 s"
    )
    per_file, per_row = 0.004, 2e-6
    if not args.skip_part1:
        per_file, per_row = part1(args)
    part2(args, per_file, per_row)
    part3(args)
    return 0


def part1(args) -> tuple[float, float]:
    spans = repeated_sample(args.copies)
    with tempfile.TemporaryDirectory(prefix="rollscope-segments-") as tmp:
        auto, raw = Path(tmp) / "auto", Path(tmp) / "raw"
        r = publish_and_compact(spans, args, auto, raw)
        print(
            f"\n## Part 1: real files ({spans.num_rows:,} spans, {r['published']:,} segments), simulated clock"
        )
        print("simulated: the clock (segments are written back to back) and the grace period (replaced files")
        print(
            "are swept at the next compaction step instead of after 300 s); files, merges and queries are real"
        )
        print(
            f"\n{'sim time':>9} {'segments published':>19} {'spans':>10} {'live files':>11} {'listed':>7}"
            f" {'footers read':>13}"
        )
        for t, published, rows, live, listed, footers in r["timeline"]:
            print(f"{t // 60:>7}m {published:>19,} {rows:>10,} {live:>11,} {listed:>7,} {footers:>13,}")
        listing = listing_cost(auto, args.repeats)
        print(
            f"\nlisting the run as a reader does (`layout.segments`, footers not cached, median of {args.repeats}):"
            f" {listing['segments'] * 1e3:.1f} ms for {listing['files']:,} files, {listing['footers']:,} footers"
            f" read; the bare `os.listdir` (baseline) {listing['listdir'] * 1e3:.2f} ms"
            f" ({listing['segments'] / listing['listdir']:.0f}x); those footers parsed whole by"
            f" `pq.read_metadata` (as before) {listing['parsed'] * 1e3:.1f} ms"
        )
        print(
            f"\npublishing: {r['publish_s']:.1f} s for {r['published']:,} segments; compaction: "
            f"{r['compact_s']:.1f} s ({r['compact_s'] / r['publish_s']:.2f}x publishing), "
            f"{r['rows_rewritten'] / spans.num_rows:.1f} rewrites per span"
        )
        auto_s, auto_n = rollscope_sql(auto, args.repeats)
        raw_s, raw_n = rollscope_sql(raw, 1)  # slow: once
        files = {
            "auto": len(layout.segments(auto, "spans", RUN)),
            "raw": len(layout.segments(raw, "spans", RUN)),
        }
        layout.compact(raw, RUN, grace_seconds=0)
        layout.compact(raw, RUN, grace_seconds=0)  # sweeps what the first replaced
        full_s, full_n = rollscope_sql(raw, args.repeats)
        assert auto_n == raw_n == full_n, (auto_n, raw_n, full_n)
        files["full"] = len(layout.segments(raw, "spans", RUN))
        print(
            f'\n`rollscope sql "{QUERY}"` (answer {full_n}; median of {args.repeats}, the never-compacted store once; a fresh process each):'
        )
        print(f"{'store':<34} {'files':>6} {'seconds':>8} {'vs compacted':>13}")
        for label, key, s in (
            ("fully compacted (baseline)", "full", full_s),
            ("compacted by the writers, live", "auto", auto_s),
            ("never compacted", "raw", raw_s),
        ):
            print(f"{label:<34} {files[key]:>6,} {s:>8.2f} {s / full_s:>12.2f}x")
    per_file, per_row = cost_model(r["steps"])
    print(
        f"\nmerge cost fitted for part 2: {per_file * 1e3:.2f} ms per file + {per_row * 1e6:.2f} µs per row"
    )
    return per_file, per_row


def part2(args, per_file: float, per_row: float) -> None:
    print(
        f"\n## Part 2: simulated {args.days} days (the real planner decides every merge; files are counters)"
    )
    print(
        f"one compaction step every {args.compact_seconds} s, replaced files kept {compaction.REPLACED_GRACE_S:.0f} s;"
        f" a merge costs {per_file * 1e3:.2f} ms/file + {per_row * 1e6:.2f} µs/row"
        f" ({'a default: --skip-part1' if args.skip_part1 else 'fitted in part 1'})"
    )
    print(
        f"\n{'':>9} {'':>15} {'':>12} {'opened':>13} {'footers':>8} {'listed':>7} {'listed before':>15}"
        f" {'':>16} {'':>14} {'':>15}"
    )
    print(
        f"{'sim time':>9} {'spans':>15} {'segments':>12} {'live':>6} {'peak':>6} {'read':>8} {'peak':>7}"
        f" {'now':>7} {'peak':>7} {'fully compacted':>16} {'rewrites/span':>14} {'compactor busy':>15}"
    )
    for now, spans, segs, live, peak, footers, listed, old, peak_old, full, wa, busy in simulate_week(
        args, per_file, per_row
    ):
        when = f"{now // 3600}h" if now < 86_400 else f"{now // 86_400}d"
        print(
            f"{when:>9} {spans:>15,} {segs:>12,} {live:>6,} {peak:>6,} {footers:>8,} {listed:>7,}"
            f" {old:>7,} {peak_old:>7,} {full:>16,} {wa:>14.2f} {busy:>14.1%}"
        )
    print(
        "\nopened: live files, what a reader opens; footers read: the merged files among them, whose footers a"
        " reader reads once\n(per process) to learn what they replace; listed: directory entries a reader lists,"
        " at the worst moment of a\ncompaction step (live files, the step's merged files and its sources until"
        f" they move aside {compaction.RETIRE_AFTER_S:.0f} s after,\nthe segments published meanwhile);"
        " listed before (baseline, the same merges): the old layout, where replaced files stayed\nbeside the"
        " live ones for the grace period; fully compacted: files after `rollscope compact`; compactor busy:"
        " share of one core"
    )


if __name__ == "__main__":
    raise SystemExit(main())
