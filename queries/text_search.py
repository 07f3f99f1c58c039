"""Text search over a run's messages, newest row groups first, stopping once the answer is known.

Why: a search lists the newest ``limit`` rollouts with a match (``search.sql``: by their last matching
message, newest first), and a phrase many rollouts hold is in nearly every row group, so the trigram sidecars
(``text_index``) keep them all and reading them was the whole cost (5 s on 2M spans, a regex with no trigram
20 s). Those newest rollouts are in the newest row groups. So the walk reads the candidate row groups by their
latest ``start_ns`` (Parquet statistics), newest first, in batches that double (``FIRST_BATCH`` ..
``MAX_BATCH``), each aggregated per rollout (``search_hits.sql``: hits, first hit, last hit; partial sums that
merge exactly, ``search_merge.sql``), and stops once ``limit`` rollouts have a last hit later than any unread
row group can hold: no rollout can overtake them. It then completes just those rollouts' hit counts and first
hits from the unread row groups that overlap their time, from ``lo_ns`` (a minute before the rollout's
``rl.rollout`` span, the clock skew ``window.sql`` allows, the one assumption: the viewer's too) to their last
hit. Row groups that end before every chosen rollout's ``lo_ns`` are never read (a step range, a few
rollouts). A phrase found nowhere, or in fewer than ``limit`` rollouts, must read every candidate: a rare one's
few row groups are walked to the end; when more than ``WALK_SHARE`` of the run is left and the first batches
say the walk would read it, ``search.sql`` reads the run instead (DuckDB's own scan is the faster reader).

Exact: the same rows, order and snippets as ``search.sql`` (``tests/test_transcripts_search_walk.py``).
"""

from __future__ import annotations

import math
import warnings

import pandas as pd

from rollscope.queries import sqlfiles, text_index, trace

FIRST_BATCH = 2  # row groups read first: 16k messages, where a common phrase's newest rollouts usually are
MAX_BATCH = 16  # row groups read at once at most (131k messages: what one batch holds in memory)
# The share of a run's messages past which the walk leaves a search to search.sql, when that many are left to
# read and the rollouts found so far say it would read that many: it reads row groups through pyarrow into
# DuckDB, 2-3 times slower a message than DuckDB's own scan of the run.
WALK_SHARE = 0.25
WALK_ONLY = ("last_ns", "lo_ns")  # search_merge.sql's columns the answer does not show


def search(cur, params: dict) -> pd.DataFrame | None:
    """``search.sql``'s answer for ``params`` (its parameters, ``run_id`` and ``limit`` among them), read
    through the walk; None when ``cur``'s reader does not list its segments, or when the walk would read most
    of the run (then search.sql reads it)."""
    found = text_index.candidates(cur, params["run_id"], params["pattern"], params["regex"])
    if found is None:
        return None
    params = {**params, "skew_ns": trace.SKEW_NS}
    chosen = _query(cur, "search_chosen", fetch=_arrow, **params)
    cur.register("_search_chosen", chosen)
    blocks = sorted(_after(found[0], _floor(chosen)), key=lambda b: -b.hi)
    partials, read = _newest(cur, blocks, params, budget=WALK_SHARE * found[1])
    if partials is None:  # most of the run to read: DuckDB's own scan reads it faster
        return None
    if read < len(blocks):  # stopped early: the chosen rollouts' hits in the row groups left
        top = _merge(cur, partials, params)
        rest = _overlapping(blocks[read:], _windows(top))
        for at in range(0, len(rest), MAX_BATCH):
            partials.append(_hits(cur, rest[at : at + MAX_BATCH], params, top["rollout_id"].tolist()))
    return _merge(cur, partials, params).drop(columns=list(WALK_ONLY))


def _query(cur, name: str, **params):
    return sqlfiles.run(cur, f"transcripts/{name}", title="Transcript query failed", **params)


def _arrow(result):
    """A query's rows as an Arrow table. DuckDB warns that a prepared statement's result is copied to get one:
    these are one row per rollout (the chosen ones, a batch's partial sums), so the copy is small."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Arrow output on a DB-API result", UserWarning)
        return result.to_arrow_table()


def _newest(cur, blocks: list, params: dict, budget: float) -> tuple[list | None, int]:
    """Partial aggregates of the newest row groups, batch by batch, until ``limit`` rollouts' last hits are
    later than the next unread row group's latest message (or none is left); with how many were read. None
    (search.sql reads the run) when more than ``budget`` messages are left and, at the rate rollouts have
    settled so far, getting ``limit`` of them would read more than ``budget``: a phrase found nowhere, or in
    too few rollouts, after the first batch."""
    partials, last, read, size, rows = [], {}, 0, FIRST_BATCH, 0
    left = sum(b.rows for b in blocks)
    while True:
        batch = blocks[read : read + size]
        partials.append(_hits(cur, batch, params))
        read, size = min(read + size, len(blocks)), min(2 * size, MAX_BATCH)
        done = sum(b.rows for b in batch)
        rows, left = rows + done, left - done
        _latest(last, partials[-1])
        settled = 0 if read == len(blocks) else _settled(last, blocks[read].hi)
        if read == len(blocks) or settled >= params["limit"]:
            return partials, read
        if left > budget and rows * params["limit"] > budget * settled:
            return None, read


def _latest(last: dict, partial) -> None:
    """Each rollout's latest hit so far, ``partial``'s taken in."""
    found = partial.select(["rollout_id", "last_ns"]).to_pydict()
    for rollout, at in zip(found["rollout_id"], found["last_ns"], strict=True):
        if at is not None:
            last[rollout] = max(at, last.get(rollout, at))


def _settled(last: dict, unread: float) -> int:
    """How many rollouts have a hit later than any unread row group's: their place in the answer is known."""
    return sum(at > unread for at in last.values())


def _hits(cur, blocks: list, params: dict, rollouts: list[str] | None = None):
    """``search_hits.sql`` over the messages of ``blocks`` (of ``rollouts`` alone, when given): an Arrow table."""
    cur.register("_search_rows", text_index.read(blocks))
    try:
        return _query(cur, "search_hits", fetch=_arrow, rollouts=rollouts, **params)
    finally:
        cur.unregister("_search_rows")


def _merge(cur, partials: list, params: dict) -> pd.DataFrame:
    import pyarrow as pa

    cur.register("_search_partials", pa.concat_tables(partials))
    try:
        return _query(cur, "search_merge", **params)
    finally:
        cur.unregister("_search_partials")


def _floor(chosen) -> float:
    """The earliest a chosen rollout's message can start (``inf``: no rollout chosen, none can)."""
    bounds = chosen["lo_ns"].to_pylist()
    if any(b is None for b in bounds):
        return -math.inf
    return min(bounds, default=math.inf)


def _after(blocks: list, floor: float) -> list:
    return [b for b in blocks if b.hi >= floor]


def _windows(top: pd.DataFrame) -> list[tuple[float, float]]:
    """The times the top rollouts' messages can start in (``lo_ns`` .. ``last_ns``), overlapping ones joined."""
    spans = sorted(
        (-math.inf if pd.isna(lo) else lo, last)
        for lo, last in zip(top["lo_ns"], top["last_ns"], strict=True)
    )
    joined: list[tuple[float, float]] = []
    for lo, hi in spans:
        if joined and lo <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(hi, joined[-1][1]))
        else:
            joined.append((lo, hi))
    return joined


def _overlapping(blocks: list, windows: list[tuple[float, float]]) -> list:
    return [b for b in blocks if any(b.hi >= lo and b.lo <= hi for lo, hi in windows)]
