"""Text search through the trigram sidecars (``store.text_index``): which row groups of a run's messages can hold
what is searched for, so a search (``text_search``) reads those alone instead of the run.

Exact by construction: a sidecar's row group has every byte trigram of its texts lowercased by DuckDB's
``lower`` (``index_text.sql``: the text ``search.sql`` searches), and a message whose lowercased text contains
``lower(pattern)`` has every trigram of it; a regular expression (RE2, case-insensitive) is pruned by the
literal runs every match must contain (``regex_literals``), without ``s`` (RE2 folds ``ſ`` to it, ``lower``
does not). ``search_hits.sql`` then applies search.sql's own predicate to the candidates. A pattern with no
trigram (shorter than three bytes, a regular expression with no literal run of three) keeps every row group:
the search still reads them newest first and stops early where it can. Sidecars missing or stale are built on
the way (``build``) while they fit ``BUILD_BUDGET_S`` a search (a live run's new segments, small); the
segments left keep every row group until ``rollscope derive`` (``index_run``) builds them."""

from __future__ import annotations

import string
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from rollscope.queries import sqlfiles
from rollscope.store import text_index as sidecars

BUILD_BUDGET_S = 2.0  # the most a search spends building the sidecars of segments that lack one
BUILD_S_PER_ROW = 30e-6  # a sidecar's cost per message (measured: 7.3 s for a 302k-message segment, loaded)
_HASH = 2654435761  # Knuth's multiplicative hash of a 24-bit trigram
_SHIFT = 32 - (sidecars.BITS.bit_length() - 1)
# RE2 characters that are themselves outside a class (a literal run of a regular expression)
_PLAIN = set(string.ascii_letters + string.digits + " ,-:;'\"=<>/!@#%&_~`")
COLUMNS = [
    "rollout_id",
    "turn_index",
    "role",
    "start_ns",
    "span_id",
    "ordinal",
    "content",
    "reasoning",
    "tool_calls",
]  # what search_hits.sql reads of a message
TEXT_COLUMNS = ["content", "reasoning", "tool_calls"]  # what a sidecar is built from (index_text.sql)


def hashes(data) -> np.ndarray:  # noqa: F821 - numpy is imported where trigrams are hashed
    """The sidecar bit of every byte trigram of ``data`` (a uint8 array)."""
    import numpy as np

    b = data.astype(np.uint32)
    code = (b[:-2] << 16) | (b[1:-1] << 8) | b[2:]
    code *= np.uint32(_HASH)  # modulo 2**32
    return code >> np.uint32(_SHIFT)


def build(con, segment: Path) -> tuple[list[int], object]:
    """``segment``'s sidecar: its row groups' sizes and bitmaps, computed (DuckDB's ``lower``) and saved. Each
    row group is read once (pyarrow) and lowercased by ``index_text.sql`` over it."""
    import numpy as np
    import pyarrow as pa

    groups = sidecars.row_groups(segment)
    bitmaps = np.zeros((len(groups), sidecars.BITS // 8), dtype=np.uint8)
    cur = con.cursor()  # _index_rows is this cursor's alone
    for group in range(len(groups)):
        cur.register("_index_rows", sidecars.read_groups(segment, [group], TEXT_COLUMNS))
        texts = (
            cur.sql(sqlfiles.load("transcripts/index_text")).to_arrow_table()["text"].combine_chunks()
        ).cast(pa.large_string())
        data = np.zeros(0, np.uint8)
        if len(texts):
            offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[
                texts.offset : texts.offset + len(texts) + 1
            ]
            data = np.frombuffer(texts.buffers()[2] or b"", dtype=np.uint8)[offsets[0] : offsets[-1]]
        bits = np.zeros(sidecars.BITS, dtype=bool)
        if len(data) >= 3:
            bits[hashes(data)] = True
        bitmaps[group] = np.packbits(bits, bitorder="little")
    cur.close()
    sidecars.save(segment, groups, bitmaps)
    return groups, bitmaps


def regex_literals(pattern: str) -> list[str] | None:
    """Runs of text every match of ``pattern`` (RE2) contains, lowercased; None when it may match without any
    (an alternative at the top, ``\\Q``): conservative, a run it is unsure of is left out."""
    if "\\Q" in pattern:
        return None
    runs, run, depth, i = [], "", 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
            if pattern[i : i + 1] in tuple("xpPC0123456789"):  # \x41, \p{Greek}, \101: more than one char
                while i + 1 < len(pattern) and (pattern[i + 1].isalnum() or pattern[i + 1] in "{}"):
                    i += 1
            runs.append(run)
            run = ""
        elif c == "[":
            i = _class_end(pattern, i)
            runs.append(run)
            run = ""
        elif c in "?*{":
            run = run[:-1]  # the character before is optional
            if c == "{":
                i = pattern.find("}", i) if "}" in pattern[i:] else len(pattern)
            runs.append(run)
            run = ""
        elif c == "|" and depth == 0:
            return None
        elif c in _PLAIN and depth == 0:
            run += c
        else:
            depth += {"(": 1, ")": -1}.get(c, 0)
            runs.append(run)
            run = ""
        i += 1
    runs.append(run)
    return [piece for r in runs for piece in r.lower().split("s") if piece]


def _class_end(pattern: str, i: int) -> int:
    """Where the character class opened at ``i`` closes (RE2: a ``]`` first in it is itself, ``[:name:]``)."""
    i += 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        if pattern[i] == "\\":
            i += 1
        elif pattern.startswith("[:", i):
            i = max(pattern.find(":]", i + 2) + 1, i)
        i += 1
    return i


def required(con, pattern: str, regex: bool):
    """The sidecar bits every candidate row group has set (a numpy array), or None: no trigram to look for."""
    import numpy as np

    if regex:
        literals = regex_literals(pattern) or []
    else:
        literals = [con.execute("SELECT lower(?)", [pattern]).fetchall()[0][0]]
    parts = [np.frombuffer(s.encode(), dtype=np.uint8) for s in literals]
    found = [hashes(p) for p in parts if len(p) >= 3]
    return np.unique(np.concatenate(found)) if found else None


def segments(con, run_id: str) -> list[Path] | None:
    """The run's live messages segments, as the reader behind ``con`` lists them; None without a reader."""
    try:
        paths = con.execute("SELECT path FROM _message_segments").fetchall()
    except duckdb.CatalogException:
        return None
    return [Path(p) for (p,) in paths if Path(p).parent.name == f"run_id={run_id}"]


@dataclass(frozen=True)
class Block:
    """One row group of a messages segment: its rows, and the earliest and latest ``start_ns`` of them
    (infinite where its statistics do not bound them)."""

    segment: Path
    group: int
    rows: int
    lo: float
    hi: float


def candidates(con, run_id: str, pattern: str | None, regex: bool) -> tuple[list[Block], int] | None:
    """The run's row groups that can hold a message matching ``pattern`` (those whose sidecar holds every
    trigram of it; every row group when it has no trigram, or no pattern) and how many messages the run has,
    or None without a reader (whose segments are not known: search every message)."""
    files = segments(con, run_id)
    if files is None:
        return None
    wanted = required(con, pattern, regex) if pattern else None
    deadline = time.monotonic() + BUILD_BUDGET_S
    blocks, total = [], 0
    for segment in files:
        rows, times = sidecars.row_groups(segment), sidecars.time_ranges(segment)
        kept = range(len(rows)) if wanted is None else _kept(con, segment, wanted, deadline)
        blocks += [Block(segment, g, rows[g], *times[g]) for g in kept]
        total += sum(rows)
    return blocks, total


def _kept(con, segment: Path, wanted, deadline: float) -> list[int]:
    """The row groups of ``segment`` whose sidecar has every bit of ``wanted``; all of them when it has no
    sidecar (one is built first while it fits the time left until ``deadline``)."""
    import numpy as np

    found = sidecars.load(segment)
    if found is None:
        groups = sidecars.row_groups(segment)
        if sum(groups) * BUILD_S_PER_ROW > deadline - time.monotonic():
            return list(range(len(groups)))  # left for a later search or `rollscope derive`
        found = build(con, segment)
    bitmaps = found[1]
    keep = np.all((bitmaps[:, wanted >> 3] >> (wanted & 7).astype(np.uint8)) & 1, axis=1)
    return [int(g) for g in np.flatnonzero(keep)]


def index_run(con, run_id: str) -> int:
    """Build every sidecar the run's messages segments lack (``rollscope derive``: what a search would otherwise
    build a little at a time, or never for a segment too big for its budget); returns how many were built."""
    built = 0
    for segment in segments(con, run_id) or []:
        if sidecars.load(segment) is None:
            build(con, segment)
            built += 1
    return built


def _schema():
    import pyarrow as pa

    from rollscope.store.schema import MESSAGES_SCHEMA

    return pa.schema([MESSAGES_SCHEMA.field(c) for c in COLUMNS])


def read(blocks: list[Block]):
    """The messages of ``blocks`` (``COLUMNS``), as one Arrow table (what ``search_hits.sql`` reads); each
    segment's row groups read together, in parallel."""
    import pyarrow as pa

    by_segment: dict[Path, list[int]] = {}
    for block in blocks:
        by_segment.setdefault(block.segment, []).append(block.group)
    tables = [sidecars.read_groups(s, groups, COLUMNS) for s, groups in by_segment.items()]
    return pa.concat_tables(tables) if tables else _schema().empty_table()


def prefilter(con, pattern: str | None) -> str:
    """An RE2 expression (case-sensitive, cheap) that every text whose ``lower`` contains ``lower(pattern)``
    matches: each character of the lowercased pattern as the class of the characters ``lower`` maps to it. The
    substring search runs ``lower`` only on the texts it passes (``lower`` over every text was three quarters of
    a scan's time). Empty (matches every text) for a pattern that is not ASCII."""
    if not pattern or not pattern.isascii() or "\x00" in pattern:
        return ""
    inverse = _inverse(con)
    if inverse is None:
        return ""
    return "".join(inverse[c] for c in pattern.lower())


_INVERSE: dict[str, str] | None = None


def _inverse(con) -> dict[str, str] | None:
    global _INVERSE
    if _INVERSE is None:
        rows = sqlfiles.run(
            con, "transcripts/lower_inverse", title="Text search failed", fetch=lambda r: r.fetchall()
        )
        if any(many for _, _, many in rows):
            return None
        found = {c: "[" + "".join(f"\\x{{{p:x}}}" for p in points) + "]" for c, points, _ in rows}
        _INVERSE = {chr(i): found.get(chr(i), f"\\x{{{i:x}}}") for i in range(1, 128)}
    return _INVERSE
