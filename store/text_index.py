"""Trigram sidecars of the messages dataset: which row groups of a segment may hold a piece of text.

A text search over a run reads every message of it (``queries/sql/transcripts/search.sql``); with the sidecars it
reads only the row groups that hold every trigram of what is searched for, and runs the same SQL over them, so
its answer is the same. A sidecar belongs to one immutable segment: one bitmap of ``BITS`` bits per row group,
bit ``hash(t)`` set for every byte trigram ``t`` of the row group's lowercased text (a Bloom filter with one
hash: a set bit may be another trigram's, a clear one proves the trigram absent). What the text is and how it
is lowercased is the queries layer's (``queries.text_index``); this module keeps the files.

Layout: ``<partition>/.text_index/<segment name>.npy`` beside the segment (a hidden folder: listings skip it),
or, when the store is not writable, the same under the user's cache folder (``derived.cache_root``). A sidecar
records its segment's size in bytes and row count per row group: one that does not fit the segment is ignored
(and written again). Sidecars of segments a compaction replaced are removed when a newer one is written.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rollscope.store import layout

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

INDEX_DIR = ".text_index"
BITS = 1 << 17  # per row group (16 KiB): ~30k distinct trigrams set about a fifth of them
VERSION = 1


def _places(segment: Path) -> list[Path]:
    """Where a segment's sidecar may be, in the order looked for: beside it, then in the user's cache."""
    from rollscope.store import derived  # its cache folder: one place for what a read-only store lacks

    partition = segment.parent
    store = partition.parent.parent
    cached = derived.cache_root(store) / INDEX_DIR / partition.parent.name / partition.name
    return [partition / INDEX_DIR / f"{segment.name}.npy", cached / f"{segment.name}.npy"]


def row_groups(segment: Path | str) -> list[int]:
    """Rows in each row group of ``segment``, from its footer."""
    meta = _footer(str(segment), Path(segment).stat().st_size)
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def time_ranges(segment: Path | str) -> list[tuple[float, float]]:
    """Each row group's earliest and latest ``start_ns``, from its footer's statistics: what a search that
    wants the newest messages reads first by. ``(-inf, inf)`` for a row group they do not bound (no
    statistics, or a row without a time)."""
    meta = _footer(str(segment), Path(segment).stat().st_size)
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    column = paths.index("start_ns") if "start_ns" in paths else -1
    return [_bounds(meta.row_group(i), column) for i in range(meta.num_row_groups)]


def _bounds(group, column: int) -> tuple[float, float]:
    stats = group.column(column).statistics if column >= 0 else None
    if stats is None or not stats.has_min_max or not stats.has_null_count or stats.null_count:
        return (-math.inf, math.inf)
    return (stats.min, stats.max)


@functools.lru_cache(maxsize=256)
def _footer(path: str, size: int):
    """A segment's Parquet footer, read once: segments are immutable (a path of another size is another
    file), and a search reads the footers of every segment of the run."""
    import pyarrow.parquet as pq

    return pq.read_metadata(path)


def load(segment: Path | str) -> tuple[list[int], np.ndarray] | None:
    """The row groups' sizes and bitmaps (``len(groups)`` × ``BITS // 8`` bytes) of ``segment``'s sidecar, or
    None when it has none that fits it."""
    import numpy as np

    segment = Path(segment)
    for place in _places(segment):
        try:
            data = np.load(place, allow_pickle=False)
        except (OSError, ValueError):
            continue
        if data.ndim != 2 or data.shape[1] != 8 + BITS // 8:
            continue
        version, size, count = (int(v) for v in data[0, :24].view("<i8"))
        if version != VERSION or size != segment.stat().st_size or data.shape[0] != count + 1:
            continue
        groups = [int(v) for v in data[1:, :8].view("<i8")[:, 0]]
        return groups, data[1:, 8:]
    return None


def save(segment: Path | str, groups: list[int], bitmaps: np.ndarray) -> Path | None:
    """Publish ``segment``'s sidecar (atomically) where it can be written; None when nowhere can."""
    import numpy as np

    segment = Path(segment)
    data = np.zeros((len(groups) + 1, 8 + BITS // 8), dtype=np.uint8)
    data[0, :24] = np.array([VERSION, segment.stat().st_size, len(groups)], dtype="<i8").view(np.uint8)
    data[1:, :8] = np.array(groups, dtype="<i8").reshape(-1, 1).view(np.uint8)
    data[1:, 8:] = bitmaps
    for place in _places(segment):
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            with layout.publishing(place, durable=False) as sink:
                np.save(sink, data, allow_pickle=False)
        except OSError:
            continue
        _forget_replaced(place.parent, segment.parent)
        return place
    return None


def _forget_replaced(folder: Path, partition: Path) -> None:
    """Remove the sidecars in ``folder`` whose segment is no longer live in ``partition``."""
    store, dataset = partition.parent.parent, partition.parent.name
    live = {p.name for p in layout.segments(store, dataset, layout.run_of(partition / "segment"))}
    for sidecar in folder.glob("*.parquet.npy"):
        if sidecar.name[: -len(".npy")] not in live:
            try:
                os.unlink(sidecar)
            except OSError:
                pass


def read_groups(segment: Path | str, groups: list[int], columns: list[str]) -> pa.Table:
    """Those row groups of ``segment``, those of ``columns`` it has (the others null, typed as the schema says)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollscope.store.schema import MESSAGES_SCHEMA

    file = pq.ParquetFile(segment)
    present = [c for c in columns if c in file.schema_arrow.names]
    table = file.read_row_groups(groups, columns=present, use_threads=True)
    return pa.table(
        {
            c: table[c].cast(MESSAGES_SCHEMA.field(c).type)
            if c in present
            else pa.nulls(table.num_rows, MESSAGES_SCHEMA.field(c).type)
            for c in columns
        }
    )
