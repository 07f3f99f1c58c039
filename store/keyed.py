"""Parquet parts sorted by a key, and the rows of some keys read from them without reading the parts whole.

An incremental catch-up looks up the run's trace index by a few dozen ids (the new spans' traces, their
rollouts, those rollouts' groups: ``queries/catch_up.py``). The ids are random, so a query over the index, even
one DuckDB filters, reads every row of it: a cost that grows with the run (0.8 s at 10M spans, 1.9 s at 30M,
per catch-up). A part written sorted by its key in small row groups (``ROW_GROUP_SIZE``) holds each key in the
one or two row groups whose min/max statistics surround it; ``Keyed.read`` reads only those, so a lookup costs
the keys looked up, not the run. DuckDB prunes row groups for a literal ``IN`` list too, but it evaluates the
list against every row of each group it reads, and at a few hundred keys that is slower than reading the part
whole; here the groups are chosen by bisection, and the caller filters their rows with a join.

A part written unsorted (an older state's) is still answered exactly: its groups' ranges are wide, so they are
all read."""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

ROW_GROUP_SIZE = 4096  # rows per row group of a keyed part: the rows a key's lookup reads, at most twice


class Keyed:
    """Lookups by ``key`` in a set of parts, each part's footer read once (a catch-up looks up several times)."""

    def __init__(self, files: list[Path], key: str):
        self.files, self.key = list(files), key
        self._groups: dict[Path, tuple] = {}

    def read(self, keys) -> list[pa.Table]:
        """The row groups of each part that may hold one of ``keys``: every row holding one, among others of
        their groups, for the caller to filter (DuckDB does it in a catch-up: pyarrow's compute functions,
        ``is_in`` or a concatenation, take 0.4 s and 50 MB the first time a process calls one)."""
        wanted = sorted({k for k in keys if k is not None})
        found = []
        for path in self.files if wanted else ():
            if chosen := self.groups(path, wanted):
                found.append(self._footer(path)[0].read_row_groups(chosen, use_threads=False))
        return found

    def groups(self, path: Path, wanted: list) -> list[int]:
        """The row groups of part ``path`` that may hold one of ``wanted`` (sorted keys)."""
        return [i for i, (lo, hi) in enumerate(self._footer(path)[1]) if _holds(wanted, lo, hi)]

    def _footer(self, path: Path):
        if path not in self._groups:
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(path)
            meta = parquet.metadata
            column = meta.schema.names.index(self.key)
            ranges = []
            for i in range(meta.num_row_groups):
                stats = meta.row_group(i).column(column).statistics
                ranges.append(
                    (stats.min, stats.max) if stats is not None and stats.has_min_max else (None, None)
                )
            self._groups[path] = (parquet, ranges)
        return self._groups[path]


def _holds(wanted: list, lo, hi) -> bool:
    """Whether a sorted list of keys has one in [lo, hi] (a group without statistics may hold any)."""
    if lo is None or hi is None:
        return True
    i = bisect_left(wanted, lo)
    return i < len(wanted) and wanted[i] <= hi
