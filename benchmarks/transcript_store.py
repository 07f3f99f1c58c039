"""What transcripts cost the store: bytes per rollout on disk, and a text search over a 10M-span run's content, each
against a baseline measured in the same run (the viewer's own costs: ``benchmarks.transcripts``, where it is).

1. **Bytes per rollout.** A run of the `sample` preset and one of the `scale` preset (``--scale-spans``) simulated
   through ``attach()`` (the normal mode: the segments a job's exporters write), its messages' bytes per rollout
   as written (each writer's LZ4 segments) and after ``rollscope compact`` (zstd, merged). Baseline: the same
   run's span segments, as written and compacted.
2. **Search.** A ``--search-spans`` run of the `scale` preset (fast mode, compacted: a benchmark store; the same
   rows), opened as a user opens it (``rollscope.queries.connect``: its first open derives it, timed apart) and
   searched through the ``messages`` view: a substring and a regex (``regexp_matches(content,
   'Traceback|FAILED')``) with a LIMIT, the regex over a step range (the rollouts ``rollout_steps`` gives for it,
   and the same bounded by that range's time, which lets DuckDB skip the row groups outside it), and a pattern
   found nowhere (the whole content read: the worst case). Each is the median of ``--repeats``. Baseline: the
   least any search reads, a scan of the content column (``sum(strlen(content))``).
Usage: python -m benchmarks.transcript_store [--scale-spans N] [--search-spans N] [--store DIR] [--repeats R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from rollscope import queries
from rollscope.simulator import config, simulate
from rollscope.store import layout

RUN = "bench"
PATTERN = "Traceback|FAILED"
# Each search as a user types it in `rollscope sql` (the step range's bounds and the run are parameters).
SEARCHES = {
    "substring, LIMIT 50": (
        "SELECT rollout_id, turn_index, left(content, 80) FROM messages "
        "WHERE run_id = $run AND contains(content, 'Traceback') LIMIT 50"
    ),
    "regex, LIMIT 50": (
        "SELECT rollout_id, turn_index, left(content, 80) FROM messages "
        "WHERE run_id = $run AND regexp_matches(content, $pattern) LIMIT 50"
    ),
    "regex, steps lo-hi, LIMIT 50": (
        "SELECT rollout_id, turn_index, left(content, 80) FROM messages "
        "WHERE run_id = $run AND rollout_id IN (SELECT rollout_id FROM rollout_steps($run) WHERE step BETWEEN $lo AND $hi) "
        "AND regexp_matches(content, $pattern) LIMIT 50"
    ),
    "regex, steps lo-hi by time, LIMIT 50": (
        "WITH chosen AS (SELECT s.rollout_id, r.start_ns, r.end_ns FROM rollout_steps($run) AS s "
        "JOIN rollouts AS r USING (rollout_id) WHERE r.run_id = $run AND s.step BETWEEN $lo AND $hi) "
        "SELECT rollout_id, turn_index, left(content, 80) FROM messages "
        "WHERE run_id = $run AND start_ns BETWEEN (SELECT min(start_ns) FROM chosen) AND (SELECT max(end_ns) FROM chosen) "
        "AND rollout_id IN (SELECT rollout_id FROM chosen) AND regexp_matches(content, $pattern) LIMIT 50"
    ),
    "regex found nowhere (every message read)": (
        "SELECT count(*) FROM messages WHERE run_id = $run AND regexp_matches(content, 'segmentation fault \\(core')"
    ),
}
BASELINE = "SELECT sum(strlen(content)) FROM messages WHERE run_id = $run"


def sizes(store: Path, dataset: str) -> int:
    return sum(p.stat().st_size for p in layout.segments(store, dataset, RUN))


def rollouts(store: Path) -> int:
    return sum(
        pq.read_table(p, columns=["name"]).column("name").to_pylist().count("rl.rollout")
        for p in layout.segments(store, "spans", RUN)
    )


def bytes_per_rollout(preset: str, spans: int | None) -> dict:
    """One normal-mode run's messages and spans, bytes per rollout as written and after compaction."""
    with tempfile.TemporaryDirectory(prefix="rollscope-transcripts-") as tmp:
        store = Path(tmp)
        result = simulate(store, RUN, config.resolve(preset), spans_target=spans, digest=False)
        n = rollouts(store)
        written = {d: sizes(store, d) for d in ("messages", "spans")}
        files = len(layout.segments(store, "messages", RUN))
        layout.compact(store, RUN, grace_seconds=0)
        compacted = {d: sizes(store, d) for d in ("messages", "spans")}
    return {"spans": result.spans, "rollouts": n, "files": files, "written": written, "compacted": compacted}


def search_store(path: Path | None, spans: int) -> tuple[Path, float | None]:
    """The search run: the one already in ``path``, or a fresh fast-mode run of about ``spans`` spans, compacted."""
    if path is not None and RUN in layout.run_ids(path):
        return path, None
    store = path or Path(tempfile.mkdtemp(prefix="rollscope-transcripts-search-"))
    started = time.perf_counter()
    simulate(store, RUN, config.resolve("scale"), spans_target=spans, fast=True, digest=False)
    layout.compact(store, RUN, grace_seconds=0)
    return store, time.perf_counter() - started


def timed(con, sql: str, params: dict, repeats: int) -> tuple[float, int]:
    seconds, rows = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        rows = len(con.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql}).fetchall())
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale-spans", type=int, default=300_000, help="spans of the scale-preset size run")
    parser.add_argument("--search-spans", type=int, default=10_000_000)
    parser.add_argument("--store", type=Path, default=None, help="keep (or reuse) the search run here")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-sizes", action="store_true", help="measure the search only")
    parser.add_argument("--skip-search", action="store_true", help="measure the bytes per rollout only")
    args = parser.parse_args()
    if not args.skip_sizes:
        for preset, spans in (("sample", None), ("scale", args.scale_spans)):
            _print_sizes(preset, bytes_per_rollout(preset, spans))
    if not args.skip_search:
        search(args)


def search(args) -> None:
    store, built = search_store(args.store, args.search_spans)
    started = time.perf_counter()
    con = queries.connect(store, run_id=RUN)
    opened = time.perf_counter() - started
    lo, hi = con.execute(
        "SELECT quantile_disc(step, 0.45), quantile_disc(step, 0.55) FROM rollout_steps($run)", {"run": RUN}
    ).fetchone()
    messages, chars = con.execute(
        "SELECT count(*), sum(content_chars) FROM messages WHERE run_id = $run", {"run": RUN}
    ).fetchone()
    content = sum(p.stat().st_size for p in layout.segments(store, "messages", RUN))
    print(
        f"search run: {messages:,} messages, {chars / 1e9:.2f} G characters, {content / 1e6:,.0f} MB of messages "
        f"files ({'built in ' + format(built, '.0f') + ' s, ' if built else ''}first open {opened:.0f} s); steps "
        f"{lo}-{hi} for the range"
    )
    params = {"run": RUN, "pattern": PATTERN, "lo": lo, "hi": hi}
    floor, _ = timed(con, BASELINE, params, args.repeats)
    print(f"  baseline, the content column scanned : {floor:7.2f} s")
    for name, sql in SEARCHES.items():
        seconds, rows = timed(con, sql, params, args.repeats)
        print(f"  {name:37}: {seconds:7.2f} s ({rows} rows) = {seconds / floor:.2f} x baseline")


def _print_sizes(preset: str, s: dict) -> None:
    n = s["rollouts"]
    print(f"{preset}: {s['spans']:,} spans, {n:,} rollouts, {s['files']} messages segments as written")
    for when in ("written", "compacted"):
        said, spans = s[when]["messages"], s[when]["spans"]
        print(
            f"  {when:9}: messages {said / n:8,.0f} B/rollout ({said / 1e6:6.1f} MB), spans {spans / n:7,.0f} "
            f"B/rollout (baseline) = {said / spans:.2f} x the spans"
        )


if __name__ == "__main__":
    main()
