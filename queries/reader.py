"""Reading a store: a DuckDB connection with the documented views, current while writers keep writing.

Two ways to hold the raw rows under the views, same views on top:

* ``materialize=False`` (``connect``): the views read the published Parquet segments directly. Nothing is
  loaded up front, so a one-off query starts at once; ``refresh()`` picks up segments published since.
* ``materialize=True`` (the dashboard): rows are copied into a native DuckDB table, 2–4× faster to aggregate,
  and ``refresh()`` copies only the segments that are new and drops those a compaction replaced, in one
  transaction, so a query sees every row exactly once. The joined views ``rollouts`` and ``turns`` (each turn
  with its rollout's consuming step), the funnel's per-rollout steps and stages, and the per-rollout and per-step
  sums the analyses read (work, busy islands, turn sums) are kept in native tables too, so an analysis reads
  thousands of rows where the run has millions of spans.

  Keeping those derived tables current is incremental: new spans name the rollouts they can change
  (``sql/raw/derive_scope.sql``), and only those rollouts' rows are derived again, by the same view
  definitions run in schema ``_delta`` over just their spans. A refresh therefore costs the new data, not
  the run. A run is rebuilt whole only when a run-wide input changes (``sql/raw/derive_plan.sql``) or a
  segment disappears other than by a compaction that kept its rows.
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from functools import cache
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from rollscope.errors import QueryError
from rollscope.queries import sqlfiles
from rollscope.store import layout as store
from rollscope.store.schema import DATASETS

_RETRIES = 5


@cache
def _schema_dir() -> Path:
    """Zero-row segments holding each dataset's full schema, read alongside the store's own segments.

    They make an empty store read as empty views rather than "no files found", and guarantee every column
    exists even when all segments predate it.
    """
    root = Path(tempfile.mkdtemp(prefix="rollscope-schema-"))
    for dataset, schema in DATASETS.items():
        target = root / dataset / "run_id=_" / "empty.parquet"
        target.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_batches([], schema=schema), target)
    return root


def _schema_file(dataset: str) -> str:
    return str(_schema_dir() / dataset / "run_id=_" / "empty.parquet")


class Reader:
    """A store opened for reading. Thread-safe: each query runs on its own cursor."""

    def __init__(self, store_dir: Path | str, *, materialize: bool = False, run_id: str | None = None):
        """``run_id``: read only that run's segments, for a command about one run in a store of many."""
        self.store = Path(store_dir)
        self.materialize = materialize
        self.run_id = run_id
        self.con = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        self._loaded: dict[str, dict[str, int]] = {name: {} for name in DATASETS}
        self._next_segment = 0
        # How refreshes brought runs' derived tables up to date ("full", "delta", "regrouped"): for tests
        # and benchmarks, which must tell an incremental refresh from a rebuild.
        self.derivations: Counter[str] = Counter()
        for dataset in DATASETS:
            self._set_files(dataset, [])
        self.con.execute(sqlfiles.load("raw/native_tables" if materialize else "raw/point_view"))
        sqlfiles.run_folder(self.con, "views")
        sqlfiles.run_folder(self.con, "analyses/macros")
        if materialize:
            self.con.execute(sqlfiles.load("raw/derived_tables"))
            self._create_delta_schema()
        self.refresh()

    def _create_delta_schema(self) -> None:
        cur = self.con.cursor()
        cur.execute(sqlfiles.load("raw/delta_schema"))
        cur.execute("SET search_path = '_delta,main'")
        sqlfiles.run_folder(cur, "views")
        sqlfiles.run_folder(cur, "analyses/macros")
        cur.execute(sqlfiles.load("raw/delta_views"))

    @property
    def read_paths(self) -> list[str]:
        """Directories the views read from (a sandbox must allow them)."""
        return [str(self.store.resolve()), str(_schema_dir())]

    def _set_files(self, dataset: str, files: list[str]) -> None:
        self.con.execute(f"SET VARIABLE rollscope_{dataset}_files = ?", [[*files, _schema_file(dataset)]])

    def refresh(self) -> int:
        """Bring the raw rows up to date with the store; returns the number of segments added."""
        with self._lock:
            return sum(self._refresh_dataset(dataset) for dataset in DATASETS)

    def _refresh_dataset(self, dataset: str) -> int:
        for attempt in range(_RETRIES):
            current = [str(p) for p in self._segments(dataset)]
            try:
                return self._load_new(dataset, current) if self.materialize else self._point(dataset, current)
            except duckdb.IOException:
                # A compaction deleted a segment between listing and reading: list again.
                if attempt == _RETRIES - 1:
                    raise
        return 0

    def _segments(self, dataset: str) -> list[Path]:
        if self.run_id is None:
            return store.segments(self.store, dataset)
        if self.run_id not in store.run_ids(self.store, dataset):
            return []  # unknown (or not a run id at all): empty views, and the analyses say "Unknown run"
        return store.segments(self.store, dataset, self.run_id)

    def _point(self, dataset: str, current: list[str]) -> int:
        added = len(set(current) - set(self._loaded[dataset]))
        if added or len(current) != len(self._loaded[dataset]):
            self._set_files(dataset, current)
            self._loaded[dataset] = dict.fromkeys(current, 0)
        return added

    def _load_new(self, dataset: str, current: list[str]) -> int:
        loaded = self._loaded[dataset]
        new = [p for p in current if p not in loaded]
        listed = set(current)
        gone = [p for p in loaded if p not in listed]
        if not new and not gone:
            return 0
        ids = {p: self._next_segment + i for i, p in enumerate(new)}
        cur = self.con.cursor()
        cur.execute("BEGIN TRANSACTION")
        try:
            gone_rows = _rows_per_run(cur, {p: loaded[p] for p in gone}) if dataset == "spans" else {}
            if gone:
                cur.execute(sqlfiles.load(f"raw/unload_{dataset}"), {"segments": [loaded[p] for p in gone]})
            if new:
                cur.register(
                    "_segment_ids", pa.table({"filename": list(ids), "_segment": list(ids.values())})
                )
                cur.execute(sqlfiles.load(f"raw/load_{dataset}"), {"files": new})
            if dataset == "spans":
                new_rows = _rows_per_run(cur, ids)
                for run in sorted({store.run_of(p) for p in [*new, *gone]}):
                    added = [i for p, i in ids.items() if store.run_of(p) == run]
                    how = _derive(cur, run, added, regrouped=gone_rows.get(run) == new_rows.get(run, 0))
                    self.derivations[how] += 1
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        self._next_segment += len(new)
        for p in gone:
            del loaded[p]
        loaded.update(ids)
        return len(new)

    # --- querying -----------------------------------------------------------------------------------------

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection for one thread. Segment lists are session variables, which cursors do not share,
        so a non-materialized reader hands out its one connection (callers serialize)."""
        return self.con.cursor() if self.materialize else self.con

    def sql(self, text: str, params: list | dict | None = None):
        """Run one query; errors come back as QueryError keeping the SQL."""
        try:
            if self.materialize:
                return self.cursor().execute(text, params).df()
            with self._lock:
                return self.con.execute(text, params).df()
        except duckdb.Error as e:
            raise QueryError("Query failed", _first_line(e), sql=text, params=params) from e

    def segment_count(self, dataset: str = "spans") -> int:
        return len(self._loaded[dataset])


def _rows_per_run(cur, segment_ids: dict[str, int]) -> dict[str, int]:
    """Rows each run holds in the given loaded segments."""
    runs: dict[str, list[int]] = {}
    for path, segment in segment_ids.items():
        runs.setdefault(store.run_of(path), []).append(segment)
    query = sqlfiles.load("raw/segment_rows")
    return {run: cur.execute(query, {"segments": ids}).fetchone()[0] for run, ids in runs.items()}


def _derive(cur, run: str, added: list[int], *, regrouped: bool) -> str:
    """Bring one run's derived tables up to date after its segments changed.

    ``regrouped``: segments went away and the new ones hold exactly as many rows, which only a compaction
    of the segments this reader had loaded produces; the rows are the same, so is everything derived.
    """
    if regrouped:
        return "regrouped"
    full, recorded = True, None
    if added:
        full, recorded = cur.execute(
            sqlfiles.load("raw/derive_plan"), {"run": run, "segments": added}
        ).fetchone()
    if full:
        sqlfiles.run_statements(cur, "raw/derive_full", {"run": run})
        return "full"
    sqlfiles.run_statements(cur, "raw/derive_scope", {"run": run, "segments": added, "recorded": recorded})
    cur.execute("SET search_path = '_delta,main'")
    try:
        sqlfiles.run_statements(cur, "raw/derive_delta", {"run": run, "segments": added})
    finally:
        cur.execute("SET search_path = 'main'")
    steps = cur.execute(sqlfiles.load("raw/scope_steps")).fetchone()[0]
    if steps:
        sqlfiles.run_statements(cur, "raw/derive_steps", {"run": run, "steps": steps})
    sqlfiles.run_statements(cur, "raw/derive_turn_sums", {"run": run, "steps": steps})
    return "delta"


def connect(
    store_dir: Path | str, *, materialize: bool = False, run_id: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every documented view over ``store_dir`` (empty store: empty views)."""
    return Reader(store_dir, materialize=materialize, run_id=run_id).con


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
