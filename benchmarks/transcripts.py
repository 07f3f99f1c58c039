"""Transcript viewer speed: the Rollouts page's render time for long transcripts, and the cost of opening one
rollout and searching a run's content on a large run.

1. render (AppTest, the run's reader warm, result caches cleared before each render: what a reader waits for
   when they open a rollout): the viewer on a 200-turn rollout and on one whose tool output is 1 MB, against a
   5-turn rollout's and the page's Timeline view of the same (the waterfall the page showed before transcripts)
   as baselines, measured in the same run; median of ``--repeats``. Target: ≤ 1 s for 200 turns.
2. ``--large N``: a run of about N spans (``rollscope simulate --fast``, built once into ``--store``) given a
   transcript for every turn (two messages of ~``--chars`` characters, written through the store's writer and
   compacted), then: opening one rollout as `rollscope show` does (its window, outcome, funnel stage, scores and
   conversation) against the same on the small run and against its messages read without the time window; and a
   text searches over the run's content (``transcripts.search``: ``SEARCHES``, a phrase planted in three
   rollouts, phrases found nowhere, in most rollouts, regular expressions; the trigram sidecars built first,
   timed; the newest row groups first, stopped early: ``text_search``) against the same search reading every
   message (search.sql) and a hand-written scan of the messages.

Usage: python -m benchmarks.transcripts [--repeats 5] [--large 10000000 --store DIR] [--chars 400]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fixtures.agent_runs import TASKS, AgentWriter  # noqa: E402
from benchmarks.fixtures.app_test import app_test  # noqa: E402

SMALL = "agent"
LARGE = "big"
WORDS = [
    "the",
    "test",
    "fails",
    "because",
    "the",
    "function",
    "returns",
    "a",
    "wrong",
    "value",
    "so",
    "I",
    "will",
    "read",
    "the",
    "file",
    "and",
    "change",
    "the",
    "return",
    "statement",
    "then",
    "run",
    "pytest",
    "again",
    "to",
    "check",
    "that",
    "every",
    "assertion",
    "holds",
    "and",
    "nothing",
    "else",
    "breaks",
]


def small_run(store: Path) -> dict[str, str]:
    """An agent run with a 5-turn, a 200-turn and a 1 MB-output rollout; their ids by what they are."""
    writer = AgentWriter(store, SMALL, seed=5, content_max_chars=2_000_000)
    for _ in range(3):
        writer.write_step()
    task = TASKS[0]
    made = {
        "5 turns": writer.attempt(task, "five", 0, turns=4).rollout_id,
        "200 turns": writer.attempt(task, "long", 0, turns=199).rollout_id,
        "1 MB tool output": writer.attempt(task, "big", 0, turns=4, tool_output_chars=1_000_000).rollout_id,
    }
    writer.finish()
    return made


def render(store: Path, run_id: str, rollout_id: str, view: str = "Conversation") -> float:
    """Seconds of one run of the Rollouts page opened at ``?rollout=``, result caches cleared first."""
    import streamlit as st

    from rollscope.app.filters import FILTERS, Filters
    from rollscope.store import layout

    at = app_test(ROOT / "app" / "screens" / "rollouts.py", 1200)
    at.session_state["store"] = str(store)
    at.session_state[FILTERS] = Filters(str(store), run_id, tuple(layout.run_ids(store)), None, None, None)
    at.session_state["rollout-view"] = view
    at.query_params["rollout"] = rollout_id
    st.cache_data.clear()
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    return seconds


def renders(store: Path, made: dict[str, str], repeats: int) -> None:
    from rollscope.app import readers

    readers.live_store(str(store)).reader(SMALL)  # opened once, as a running dashboard holds it
    cases = {  # the two baselines first; every case once a round, so the machine's load hits all alike
        "5 turns, Conversation (baseline)": (made["5 turns"], "Conversation"),
        "5 turns, Timeline (the page before)": (made["5 turns"], "Timeline"),
        "200 turns": (made["200 turns"], "Conversation"),
        "1 MB tool output": (made["1 MB tool output"], "Conversation"),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for rollout, view in cases.values():
        render(store, SMALL, rollout, view)  # the first: imports, the page's compile, files read first
    for _ in range(repeats):
        for name, (rollout, view) in cases.items():
            times[name].append(render(store, SMALL, rollout, view))
    base, timeline = (statistics.median(times[n]) for n in list(cases)[:2])
    print(
        f"viewer render (AppTest, caches cleared; median and least of {repeats}); target ≤ 1 s for 200 turns:"
    )
    for name, taken in times.items():
        mid = statistics.median(taken)
        print(
            f"  {name:<36} {mid:6.3f} s (least {min(taken):.3f} s) = {mid / base:.2f} × 5 turns, "
            f"{mid / timeline:.2f} × Timeline",
            flush=True,
        )


# --- a large run -------------------------------------------------------------------------------------------------


def large_run(store: Path, spans: int, chars: int) -> None:
    """A simulated run of about ``spans`` spans with two messages per turn, unless the store has it already."""
    from rollscope.store import layout

    if not layout.segments(store, "spans", LARGE):
        from rollscope.simulator import config, simulate

        started = time.perf_counter()
        simulate(store, LARGE, config.resolve("sample", []), preset="sample", spans_target=spans, fast=True)
        print(f"simulated {LARGE}: {time.perf_counter() - started:.0f} s", flush=True)
    if not layout.segments(store, "messages", LARGE):
        started = time.perf_counter()
        rows = write_messages(store, chars)
        layout.compact(store, LARGE, grace_seconds=0)
        print(f"wrote {rows:,} messages in {time.perf_counter() - started:.0f} s", flush=True)


def write_messages(store: Path, chars: int, batch: int = 1_000_000) -> int:
    """Two messages per turn of the run (its input and reply, ~``chars`` characters of varied words each), in
    start order, published through the store's writer as a job's exporter would."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from rollscope.store import layout
    from rollscope.store.schema import MESSAGES_SCHEMA

    files = [str(p) for p in layout.segments(store, "spans", LARGE)]
    turns = duckdb.sql(
        "SELECT trace_id, span_id, start_ns, rollout_id, turn_index FROM read_parquet(?) "
        "WHERE name = 'rl.turn' AND rollout_id IS NOT NULL ORDER BY start_ns",
        params=[files],
    ).to_arrow_table()
    writer, rng, vocabulary = (
        layout.SegmentWriter(store, "messages"),
        np.random.default_rng(7),
        np.array(WORDS),
    )
    for offset in range(0, turns.num_rows, batch):
        part = turns.slice(offset, batch)
        n = part.num_rows
        texts = [" ".join(rng.choice(vocabulary, chars // 6)) for _ in range(min(n, 4096))]
        columns = {
            "trace_id": pa.concat_arrays([part["trace_id"].combine_chunks()] * 2),
            "span_id": pa.concat_arrays([part["span_id"].combine_chunks()] * 2),
            "start_ns": pa.concat_arrays([part["start_ns"].combine_chunks()] * 2),
            "rollout_id": pa.concat_arrays([part["rollout_id"].combine_chunks()] * 2),
            "turn_index": pa.concat_arrays([part["turn_index"].combine_chunks()] * 2),
            "span_name": pa.array(["rl.turn"] * (2 * n)),
            "ordinal": pa.array([1] * n + [3] * n),
            "source": pa.array(["input"] * n + ["output"] * n),
            "message_index": pa.array([0] * (2 * n)),
            "role": pa.array(["user"] * n + ["assistant"] * n),
            "content": pa.array([texts[i % len(texts)] for i in range(2 * n)]),
            "finish_reason": pa.array([None] * n + ["stop"] * n),
            "content_chars": pa.array([len(texts[i % len(texts)]) for i in range(2 * n)]),
            "truncated": pa.array([False] * (2 * n)),
        }
        table = pa.table(
            {
                f.name: columns[f.name].cast(f.type) if f.name in columns else pa.nulls(2 * n, f.type)
                for f in MESSAGES_SCHEMA
            }
        ).sort_by("start_ns")
        writer.publish(LARGE, table)
    return 2 * turns.num_rows


def open_rollout(con, run_id: str, rollout_id: str) -> float:
    """Seconds `rollscope show` spends reading one rollout: window, outcome, stage, scores, conversation."""
    from rollscope.app.commands.show import read

    started = time.perf_counter()
    read(con, run_id, rollout_id, 2_000)
    return time.perf_counter() - started


def unbounded(con, run_id: str, rollout_id: str) -> float:
    started = time.perf_counter()
    con.execute("SELECT * FROM messages WHERE run_id = ? AND rollout_id = ?", [run_id, rollout_id]).fetchall()
    return time.perf_counter() - started


def large(store: Path, made: dict[str, str], repeats: int) -> None:
    from rollscope.queries.reader import Reader

    started = time.perf_counter()
    big = Reader(store, run_id=LARGE)
    print(f"open the large run (derive it the first time): {time.perf_counter() - started:.0f} s", flush=True)
    spans = big.con.execute("SELECT count(*) FROM raw_spans").fetchone()[0]
    messages = big.con.execute("SELECT count(*) FROM raw_messages").fetchone()[0]
    ids = [r for (r,) in big.con.execute(
        "SELECT rollout_id FROM rollouts WHERE run_id = ? ORDER BY hash(rollout_id) LIMIT ?", [LARGE, repeats + 1]
    ).fetchall()]  # fmt: skip
    small = Reader(store, run_id=SMALL)
    base = statistics.median(open_rollout(small.con, SMALL, made["5 turns"]) for _ in range(repeats + 1))
    opened = statistics.median(open_rollout(big.con, LARGE, r) for r in ids)
    naive = statistics.median(unbounded(big.con, LARGE, r) for r in ids)
    print(f"open one rollout (as rollscope show reads it) on {spans:,} spans, {messages:,} messages:")
    print(f"  {opened:.3f} s (median of {len(ids)} rollouts) against {base:.3f} s on the small run "
          f"({opened / base:.2f}×); its messages read without the window {naive:.3f} s")  # fmt: skip
    searches(store, big)


NEEDLE = "the flux capacitor overheated"  # planted in NEEDLED rollouts of the large run (``plant``)
NEEDLED = 3
SEARCHES = [  # (what, pattern, regex)
    (f"a phrase in {NEEDLED} rollouts", NEEDLE.upper(), False),
    ("a phrase nowhere, rare trigrams", "zebra crossing quantum", False),
    ("a phrase nowhere, common trigrams", "assertion holds and nothing", False),
    ("a phrase in most rollouts", "pytset: command not found", False),
    (f"a regex in {NEEDLED} rollouts", r"flux capacitor (overheated|melted)", True),
    ("a regex in most rollouts", r"pytset: command not found", True),
    ("a regex with no trigram", r"\d\d\d\d\d\d\d\d\d\d\d\d", True),
]


def plant(store: Path) -> None:
    """One more messages segment: ``NEEDLE`` said in ``NEEDLED`` rollouts (a segment that arrives after the
    others, as in a live run), unless the run has it already."""
    import duckdb
    import pyarrow as pa

    from rollscope.store import layout
    from rollscope.store.schema import MESSAGES_SCHEMA

    files = [str(p) for p in layout.segments(store, "messages", LARGE)]
    if any(Path(f).name.startswith("seg-needle") for f in files):
        return
    rows = duckdb.sql(
        "SELECT * FROM read_parquet(?) WHERE role = 'assistant' AND content IS NOT NULL "
        "ORDER BY hash(rollout_id) LIMIT ?",
        params=[files, NEEDLED],
    ).to_arrow_table()
    content = pa.array([f"I think {NEEDLE} again, message {i}" for i in range(rows.num_rows)])
    table = rows.set_column(rows.schema.get_field_index("content"), "content", content)
    table = pa.table({f.name: table[f.name].cast(f.type) for f in MESSAGES_SCHEMA})
    layout.SegmentWriter(store, "messages", prefix="seg-needle").publish(LARGE, table)


def searches(store: Path, big) -> None:
    """Each of ``SEARCHES`` through the sidecars and the walk (the sidecars built first: the cold cost), against
    the same search reading every message (``walk=False``: search.sql, prefilter kept) and a hand-written scan
    (``contains(lower(content), …)``, ``regexp_matches(content, '(?i)…')``), in one run; with the messages the
    walk read (its row groups' rows)."""
    from rollscope.queries import text_index, transcripts

    started = time.perf_counter()
    for segment in text_index.segments(big.con, LARGE):
        if text_index.sidecars.load(segment) is None:
            text_index.build(big.con, segment)
    print(f"trigram sidecars built: {time.perf_counter() - started:.1f} s", flush=True)
    print("text search over the run's content (target ≤ 2 s):")
    reading, read = text_index.read, []
    text_index.read = lambda blocks: read.append((table := reading(blocks)).num_rows) or table
    for what, pattern, regex in SEARCHES:
        read.clear()
        started = time.perf_counter()
        found = transcripts.search(big.con, LARGE, pattern, regex=regex)
        walked = time.perf_counter() - started
        rows = sum(read)
        started = time.perf_counter()
        plain = transcripts.search(big.con, LARGE, pattern, regex=regex, walk=False)
        scanned = time.perf_counter() - started
        assert plain.equals(found), what
        test = "regexp_matches(content, '(?i)' || ?)" if regex else "contains(lower(content), lower(?))"
        started = time.perf_counter()
        big.con.execute(f"SELECT count(DISTINCT rollout_id) FROM messages WHERE {test}", [pattern]).fetchall()
        scan = time.perf_counter() - started
        print(f"  {what:<36} {walked:6.2f} s ({len(found)} rollouts listed, {rows:,} messages read); "
              f"search.sql {scanned:6.2f} s; hand-written scan {scan:6.2f} s ({walked / scan:.2f}×)",
              flush=True)  # fmt: skip
    text_index.read = reading


def main() -> int:
    logging.disable(logging.WARNING)  # AppTest and caches outside a server warn about it on every run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--large", type=int, metavar="SPANS", help="also measure a run of about SPANS spans")
    parser.add_argument("--chars", type=int, default=400, help="characters per message of the large run")
    parser.add_argument("--store", type=Path, help="build into (or reuse) this store")
    args = parser.parse_args()
    store = args.store or Path(tempfile.mkdtemp(prefix="rollscope-transcripts-")) / "store"
    from rollscope.store import layout

    if SMALL in layout.run_ids(store) if store.exists() else False:
        made = {"5 turns": "five-0", "200 turns": "long-0", "1 MB tool output": "big-0"}
    else:
        made = small_run(store)
    if args.large:  # built before any render: AppTest runs the page as __main__, which the simulator's
        large_run(store, args.large, args.chars)  # fast-mode writer (a spawned process) would then import
        plant(store)
    renders(store, made, args.repeats)
    if args.large:
        large(store, made, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
