"""Writing a derived table's rows as Parquet parts: one per block of consuming steps (or one whole), sorted as a
merged part is, and merged tier by tier so a run of any length keeps few (``consolidate``).

Apart from the ways of deriving because a full derivation (``pieces``), an incremental catch-up (``catch_up``)
and a refresh (``refresh``) all write the layout ``store/derived.py`` documents the same way.
"""

from __future__ import annotations

import math
import os
import secrets
from pathlib import Path

from rollscope.queries import sqlfiles
from rollscope.queries.derive_db import column_names, stored, table_names
from rollscope.queries.tables import BY_NAME as _TABLES
from rollscope.store import derived, keyed
from rollscope.store.derived import part_range

FANOUT = 8  # parts of one tier merged into one by consolidate


# The index's parts looked up by key (store/keyed.py), each written sorted by its key: the trace index by trace,
# and its keys (each rollout and group id with the traces that hold it) by id.
KEYED = {"_traces": "trace_id", "_trace_keys": "key"}


TRUE = sqlfiles.Fragment("true")  # a condition every row satisfies


def with_block(con, relation: str, where: sqlfiles.Fragment = TRUE) -> sqlfiles.Fragment:
    """``relation``'s rows (a name) that satisfy ``where``, with the block of their step (a table without a
    step column: its rollout's consuming step, from the derived rollout_steps rows) as ``_block``
    (``with_block.sql``; the block size read at each call, so a test may set ``derived.BLOCK_STEPS``)."""
    if "step" in column_names(con, relation):
        return sqlfiles.fragment(
            "raw/derive/with_block", relation=relation, where=where, block_steps=derived.BLOCK_STEPS
        )
    # A catch-up's scoped rows, once read_final has pointed _rollout_steps_mat at the run's every part: the
    # scoped rollout_steps rows (_rollout_steps_scoped) hold the same steps for them, without reading the run's.
    steps = "_rollout_steps_scoped" if "_rollout_steps_scoped" in table_names(con) else "_rollout_steps_mat"
    return sqlfiles.fragment(
        "raw/derive/with_rollout_block",
        relation=relation,
        steps=steps,
        where=sqlfiles.Fragment(where.replace("rollout_id", "t.rollout_id", 1)),
        block_steps=derived.BLOCK_STEPS,
    )


def union(first: sqlfiles.Fragment, second: sqlfiles.Fragment) -> sqlfiles.Fragment:
    """The rows of two queries, columns matched by name (``union.sql``)."""
    return sqlfiles.fragment("raw/derive/union", first=first, second=second)


def write_blocked(con, name: str, relation: sqlfiles.Fragment, staging: Path) -> list[Path]:
    """Write ``relation`` (rows with ``_block``) as one part per block, ``<name>/b=<block>/<token>.parquet``."""
    sqlfiles.execute(con, "raw/derive/writing_view", fill={"relation": relation})
    target = staging / name
    select = sqlfiles.Fragment(stored(con, "_writing", skip=("_block",)))
    sqlfiles.execute(con, "raw/derive/write_blocked", fill={"select": select}, target=str(target))
    parts = []
    for written in sorted(target.glob("_block=*/*.parquet")):
        block = written.parent.name.removeprefix("_block=")
        final = target / f"b={block}" / f"{secrets.token_hex(6)}.parquet"
        final.parent.mkdir(exist_ok=True)
        os.replace(written, final)
        written.parent.rmdir() if not any(written.parent.iterdir()) else None
        parts.append(final)
    return parts


def write_whole(con, name: str, relation: str, staging: Path) -> Path:
    """``relation`` as one part, ``<name>/b=all/<token>.parquet``; an index part looked up by key (``KEYED``)
    sorted by it in small row groups, so that a lookup reads only the groups of its keys."""
    target = staging / name / "b=all" / f"{secrets.token_hex(6)}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    key = KEYED.get(name)
    order, rows = (_order_by((key,)), keyed.ROW_GROUP_SIZE) if key else (_NO_ORDER, 122880)
    fill = {"select": sqlfiles.Fragment(stored(con, relation)), "relation": relation, "order": order}
    sqlfiles.execute(con, "raw/derive/write_whole", fill=fill, target=str(target), rows=rows)
    return target


_NO_ORDER = sqlfiles.Fragment("")


def _order_by(columns) -> sqlfiles.Fragment:
    """An ORDER BY of these columns in this order (each a quoted name; not ``COLUMNS([...])``, which sorts in
    the relation's column order, not the list's)."""
    return sqlfiles.Fragment("ORDER BY " + ", ".join(map(sqlfiles.identifier, columns)))


def merge_parts(con, name: str, files: list[Path], target: Path) -> None:
    """Parts ``files`` of table ``name`` merged into one at ``target``, sorted as a merged part is
    (``merge_parts.sql``)."""
    fill = {"order": merged_order(name)}
    sqlfiles.execute(
        con, "raw/derive/merge_parts", fill=fill, files=[str(f) for f in files], target=str(target)
    )


def blocks_by_rollout_step(con, name: str) -> bool:
    """Whether table ``name``'s parts are blocked by its rollouts' consuming steps (``with_block``)."""
    table = _TABLES.get(name)
    return bool(table and table.blocked and "step" not in column_names(con, f"_{name}_mat"))


def consolidate(con, name: str, parts: list[Path], staging: Path) -> list[Path]:
    """Merge a blocked table's parts of consumed steps, tier by tier, until no tier holds ``FANOUT`` parts, so a
    run of any length keeps few: a part's tier is ``floor(log_FANOUT(blocks it spans))``; ``FANOUT`` parts of
    one tier, none holding the newest two blocks (which the next catch-ups rewrite), become one part of the
    blocks from the first to the last, which may complete the next tier's. Each row is rewritten at most
    ``log_FANOUT(blocks)`` times; a table keeps under ``FANOUT`` parts per tier.

    Both paths: a full derivation's one part per block (a 30M-span run: ~1,000 parts per table, which every
    reader would open) become ~13 before it publishes; an incremental catch-up's rewritten blocks join the
    tiers. Pass by pass: each merge reads only its own parts, a streaming copy (memory: one row group) or, for a
    table kept in step order, a sort of them (``merged_order``) that spills to disk past the memory limit
    (writing the merged parts directly, ``COPY … PARTITION_BY`` over few, large partitions, ran a 30M-span
    derivation out of its memory limit). A part merged within this catch-up (under ``staging``) is deleted
    once merged again: no manifest ever named it; a published part is left to the manifest's retirement."""
    while True:
        merged = _consolidate_pass(con, name, parts, staging)
        if merged == parts:
            return parts
        for gone in set(parts) - set(merged):
            if gone.is_relative_to(staging):
                gone.unlink(missing_ok=True)
        parts = merged


def merged_order(name: str) -> sqlfiles.Fragment:
    """The ORDER BY of a merged part of table ``name`` (``Table.row_order``; none for a table without one).

    A merged part holds the rows of many blocks, and a block's part is written in no particular order (``COPY
    … PARTITION_BY`` does not keep one); sorted, each row group holds a narrow range of steps (and one grain),
    which a query of a step range or grain skips by its statistics. At 30M spans the report's reads of
    ``prefill_sums`` and ``spec_sums`` went from 1.45M and 1.27M rows to the 0.1–0.2M of the grain each reads.
    The sort is of the parts being merged, spilled to disk past the derivation's memory limit."""
    table = _TABLES.get(name)
    return _order_by(table.row_order) if table and table.row_order else _NO_ORDER


def _consolidate_pass(con, name: str, parts: list[Path], staging: Path) -> list[Path]:
    """One pass of ``consolidate``: every tier's full groups of ``FANOUT`` parts merged once."""
    ranged = sorted((part_range(p), p) for p in parts if part_range(p) is not None)
    merged: dict[Path, Path | None] = {}
    for group in merge_groups([r for r, _ in ranged]):
        first, last = ranged[group[0]][0][0], max(ranged[i][0][1] for i in group)
        files = [ranged[i][1] for i in group]
        target = staging / name / f"b={first}_{last}" / f"{secrets.token_hex(6)}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        merge_parts(con, name, files, target)
        merged.update({p: None for p in files})
        merged[files[0]] = target
    return [merged.get(p, p) for p in parts if merged.get(p, p) is not None]


def merge_groups(ranges: list[tuple[int, int]]) -> list[list[int]]:
    """The merges one pass of ``consolidate`` makes of parts holding the sorted block ranges ``ranges``: groups
    of ``FANOUT`` indexes into ``ranges``, each of one tier (``floor(log_FANOUT(blocks it spans))``) and none
    holding the newest two blocks."""
    if not ranges:
        return []
    newest = max(last for _, last in ranges)
    tiers: dict[int, list[int]] = {}
    for i, (first, last) in enumerate(ranges):
        if last < newest - 1:
            tiers.setdefault(int(math.log(last - first + 1, FANOUT) + 1e-9), []).append(i)
    return [
        group[i : i + FANOUT] for group in tiers.values() for i in range(0, len(group) - FANOUT + 1, FANOUT)
    ]


def final_parts(blocks: list[int]) -> list[tuple[int, int]]:
    """The parts a blocked table of rows in ``blocks`` (consuming steps' blocks, sorted) ends in once
    ``consolidate`` is done with one part per block: the block ranges of its fixed point. A full derivation
    writes these parts directly (``queries/pieces.py``), so no row is rewritten tier by tier."""
    ranges = [(b, b) for b in blocks]
    while groups := merge_groups(ranges):
        merged = {i: (ranges[g[0]][0], ranges[g[-1]][1]) for g in groups for i in g}
        firsts = {g[0] for g in groups}
        ranges = sorted(merged.get(i, r) for i, r in enumerate(ranges) if i not in merged or i in firsts)
    return ranges
