"""The store's live files, for engines that read them directly: Ray Data here, Spark, Trino or DuckDB elsewhere.

One rule makes their answers exact: read the files a reader of the store reads now, never a directory.

* A raw dataset (``spans``, ``collector_stats``): each run's live segments (``layout.segments``), never the
  files a merge replaced. A merged file names its sources in its footer and they stay beside it for about a
  second (longer after a compactor was killed), so an engine that reads every file of a partition counts
  those rows twice meanwhile.
* A derived table (``rollouts``, ``funnel_sums``, ...): the parts each run's manifest names
  (``store.derived``), never every file under ``parts/``, which also holds parts a newer manifest retired and
  parts of a catch-up not yet published.

A listing is a snapshot of names: the files it names stay readable for the grace period (300 s) after a
compaction or a catch-up replaces them (raw ones moved aside into ``.replaced/``, where ``layout.resolve``
finds them), so a job that takes longer lists again. ``ray`` is imported only by :func:`ray_dataset`.
"""

from __future__ import annotations

from pathlib import Path

from rollscope.store import derived, layout
from rollscope.store.schema import DATASET_NAMES


def live_files(store: Path | str, table: str = "spans", runs: list[str] | None = None) -> list[str]:
    """The files holding ``table`` for ``runs`` (every run by default) that a reader reads now: a raw
    dataset's live segments, or a derived table's parts as each run's latest manifest names them (a run never
    derived has none: `rollscope derive --store DIR --all` first). Which derived tables there are is read from
    the manifests (the query layer declares them, ``queries/tables.py``): a name none of them holds is refused
    once some run is derived."""
    if table in DATASET_NAMES:
        runs = layout.run_ids(store, table) if runs is None else runs
        return [str(p) for run in runs for p in layout.segments(store, table, run)]
    runs = layout.run_ids(store) if runs is None else runs
    states = [s for s in (derived.latest(store, run) for run in runs) if s is not None]
    known = sorted({name for s in states for name in s.tables if not name.startswith("_")})
    if table.startswith("_") or (states and table not in known):
        raise ValueError(f"unknown table {table!r}: one of {', '.join((*DATASET_NAMES, *known))}")
    return [f for state in states for f in state.file_names().get(table, ())]


def ray_dataset(store: Path | str, table: str = "spans", runs: list[str] | None = None, **read_args):
    """``table`` of ``runs`` as a Ray Dataset, read from :func:`live_files` (``ray.data.read_parquet``,
    ``read_args`` passed on). A raw dataset gets ``run_id`` from its partition folders (parsed below the
    dataset's folder only: a store kept under ``lr=1e-5/`` gets no ``lr`` column); a derived table holds it
    as a column. The store must be where every node of the cluster reads it at the same path."""
    import ray.data
    from ray.data.datasource import Partitioning

    store = Path(store).resolve()  # the same path on every node
    files = live_files(store, table, runs)
    if not files:
        raise ValueError(
            f"no files of {table} in {store} for runs {runs or 'any'} (derived tables: derive first)"
        )
    partitioning = None  # a derived table holds run_id
    if table in DATASET_NAMES:
        partitioning = Partitioning("hive", base_dir=str(store / table), field_types={"run_id": str})
    return ray.data.read_parquet(files, partitioning=partitioning, **read_args)
