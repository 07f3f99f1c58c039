"""Reading a store: a DuckDB connection with the documented views, current while writers keep writing.

Every reader reads two kinds of data, both Parquet on disk, nothing copied into memory:

* **raw** views (``spans``, ``tools``, ``samples``, ...) read the run's live segments lazily, with filter
  pushdown: one rollout's waterfall reads one trace's row groups, not the run.
* **derived** tables (``rollouts``, ``turns``, ``train_steps`` and what the analyses read: per-rollout steps,
  stages and work, per-step sums and busy islands, turn sums) are read from the store's derived Parquet files,
  which ``rollscope.store.derived`` keeps current: opening a run whose derived state is older than its raw
  segments derives it again first (``queries.derive``, under a memory limit, spilling to disk), once for every
  process reading the store, and publishes it atomically.

``refresh()`` re-lists segments and catches up the runs whose segments changed. ``materialize`` is accepted
for compatibility and changes nothing: every reader reads the derived tables on disk. ``wait=False`` (the
dashboard's live refresh) reads the last published state while another process is catching up, rather than
waiting for it. ``derive=False`` never derives (``rollscope runs`` reads raw data only).
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeVar

import duckdb

from rollscope.errors import QueryError, StoreError
from rollscope.queries import definition_cache, definitions, derive_db, derived_schemas, sqlfiles
from rollscope.queries.derive import derive as derive_run
from rollscope.queries.derive_db import analysis_macros, raw_views, typed_nulls
from rollscope.queries.tables import TABLE_NAMES
from rollscope.store import derived, schema
from rollscope.store import layout as store

_RETRIES = 5
T = TypeVar("T")
_VERSIONS = itertools.count(1)  # unique across readers: a result cached under one is never another's


@cache
def _schema_dir() -> Path:
    """Zero-row segments holding each dataset's full schema, read alongside the store's own segments.

    They make an empty store read as empty views rather than "no files found", and guarantee every column
    exists even when all segments predate it. Written by DuckDB from the declared columns (``store.schema``),
    typed as DuckDB reads the writers' files: a reader never imports pyarrow.

    Kept in the user's cache folder (``settings.cache_dir``) under a name that is the digest of the columns,
    their types and the DuckDB that typed them: written once, then read by every process, and nothing is left
    in the temp folder by a cron ``check`` or a killed reader (each once left a folder there). A folder appears
    whole or not at all (written beside it, then renamed), so concurrent first readers never see half of one.
    A cache that cannot be written: a folder of the process's own in the temp folder, removed at exit by the
    process that made it (a forked child that exits normally must not take its parent's); so is a cached
    folder someone emptied."""
    from rollscope import settings

    try:
        root = settings.cache_dir() / f"schema-{_schema_digest()}"
        if not root.is_dir():
            root.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
            try:
                _write_schema_files(staging)
                staging.rename(root)
            except (OSError, duckdb.Error):  # another process published it first, or a cache that is full
                shutil.rmtree(staging, ignore_errors=True)
        if all(_schema_path(root, dataset).is_file() for dataset in schema.DATASET_NAMES):
            return root
    except OSError:
        pass
    root = _temporary_dir("rollscope-schema-")
    _write_schema_files(root)
    return root


def _schema_digest() -> str:
    declared = [
        [dataset, [[c, schema.DUCKDB_TYPES[t]] for c, t in schema.columns(dataset)]]
        for dataset in schema.DATASET_NAMES
    ]
    text = json.dumps([duckdb.__version__, declared])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write_schema_files(root: Path) -> None:
    con = duckdb.connect()
    try:
        for dataset in schema.DATASET_NAMES:
            target = _schema_path(root, dataset)
            target.parent.mkdir(parents=True)
            names = ", ".join(
                f'CAST(NULL AS {schema.DUCKDB_TYPES[t]}) AS "{c}"' for c, t in schema.columns(dataset)
            )
            path = str(target).replace("'", "''")
            con.execute(f"COPY (SELECT {names} WHERE false) TO '{path}' (FORMAT parquet)")
    finally:
        con.close()


def _temporary_dir(prefix: str) -> Path:
    """A folder of this process's own in the temp folder, removed when it exits."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(_remove_dir, root, os.getpid())
    return root


def _remove_dir(root: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


@cache
def _links_dir() -> Path:
    """The process's symbolic links to stores kept under ``key=value`` folders (``hive_path``)."""
    return _temporary_dir("rollscope-links-")


def empty_select(columns: list[list[str]]) -> str:
    """No rows, typed as a derived table's columns say (a manifest's, or ``derived_schemas.current``) and as its
    Parquet reads (FLOP sums as DECIMAL(38, 0)): what a reader reads for a table no run it reads has rows of."""
    return f"SELECT {typed_nulls(columns, stored=True)} WHERE false"


def _define(con) -> None:
    """A reader's definitions in ``con``, over no files yet (its first refresh points the raw views and the
    derived tables' views at the store's): copied from the user's cache where a reader kept them
    (``definition_cache``), else created and kept there. DuckDB binds a view again whenever a query reads it,
    so the derived views and the macros over them, created here over empty tables typed as the shipped
    schemas say, read whatever the store's parts hold."""
    schemas = derived_schemas.current()
    texts = [definition_cache.source(__file__), definition_cache.source(derive_db.__file__)]
    texts += [*map(schema_file, schema.DATASET_NAMES), json.dumps(schemas, sort_keys=True)]
    texts += [sqlfiles.load(n) for n in ("raw/raw_views", *sqlfiles.folder("views"), "raw/derived_views")]
    texts += [statement for statement, _, _ in _reader_macros()]

    def create() -> None:
        raw_views(con, [schema_file("spans")], [schema_file("collector_stats")])
        sqlfiles.run_folder(con, "views")
        for name in TABLE_NAMES:
            _empty_view(con, f"_{name}_mat", schemas[name])
        sqlfiles.execute(con, "raw/derived_views")
        for statement in _reader_macros():
            sqlfiles.execute_statement(con, statement)

    definition_cache.copy_or_create(con, "reader", texts, create)


def _empty_view(cur, name: str, columns: list[list[str]]) -> None:
    """View ``name``: no rows, typed as a derived table's ``columns`` (``empty_select``)."""
    query = sqlfiles.Fragment(empty_select(columns))
    sqlfiles.execute(cur, "raw/derive/view_of", fill={"name": name, "query": query})


def _reader_macros() -> tuple[sqlfiles.Statement, ...]:
    """The analyses' macros (``sql/analyses/macros``) a reader creates after the derived views: all but the
    definitions over raw spans that the store's derived tables hold instead (``*_src``, ``*_staged``) and the
    names the derived views define. DuckDB binds a table macro when it is created, through every view and macro
    it reads, so creating those definitions would cost a reader as much as all the rest of opening a store."""
    return analysis_macros(definitions=False)


def _one_schema(states, name: str) -> bool:
    """Whether every run's manifest gives derived table ``name`` the same columns and types (then its parts
    are read without ``union_by_name``: binding reads one footer, not every part's)."""
    columns = [
        s.meta.get("schemas", {}).get(name) if isinstance(s.meta.get("schemas"), dict) else None
        for s in states
    ]
    return bool(columns) and columns[0] is not None and all(c == columns[0] for c in columns)


def schema_file(dataset: str) -> str:
    return str(_schema_path(_schema_dir(), dataset))


def _schema_path(root: Path, dataset: str) -> Path:
    """Where in a schema folder (``_schema_dir``) ``dataset``'s zero-row segment is."""
    return root / dataset / "run_id=_" / "empty.parquet"


# A raw segment's path: the store's directory, then <dataset>/run_id=<run>/<segment>.
_DATASET_PART = re.compile(
    r"/(?:" + "|".join(map(re.escape, schema.DATASET_NAMES)) + r")/run_id=[^/]+/[^/]+$"
)


def hive_path(path: str) -> str:
    """``path``, a raw segment read with hive partitioning beside the schema files, through a name without
    ``=`` above its dataset's folder.

    DuckDB reads every ``key=value`` folder of a path as a column, so a store kept under such a folder
    (``/ckpt/lr=1e-5/runs``, a common shape for an experiment's outputs) gave its segments an ``lr`` key the
    schema files lack, and every read failed ("Hive partition mismatch"); had the key been a column's name it
    would have replaced that column's values. Such a store is read through a symbolic link to it, in this
    process's own temporary folder (``_links_dir``, removed at exit; removing a link leaves its target), so
    ``run_id`` is the only key DuckDB sees. Other paths are returned as they are."""
    match = _DATASET_PART.search(path)
    if match is None or "=" not in path[: match.start()]:
        return path
    # Absolute: the link lives in another folder, where a relative target would point at nothing.
    return _store_link(os.path.abspath(path[: match.start()])) + path[match.start() :]


@cache
def _store_link(root: str) -> str:
    link = _links_dir() / hashlib.sha1(root.encode()).hexdigest()[:16]
    try:
        link.symlink_to(root, target_is_directory=True)
    except FileExistsError:  # made by another thread of this process first
        pass
    return str(link)


class Reader:
    """A store opened for reading. Thread-safe: each query runs on its own cursor."""

    def __init__(
        self,
        store_dir: Path | str,
        *,
        materialize: bool = False,
        run_id: str | None = None,
        wait: bool = True,
        derive: bool = True,
    ):
        """``run_id``: read (and derive) only that run, for a command about one run in a store of many."""
        self.store = Path(store_dir)
        self.materialize = materialize
        self.run_id = run_id
        self.wait = wait
        self.derive = derive
        # Parquet footers parsed once per file, not at every bind: the raw views read their segments with
        # union_by_name, so binding any query over them read every segment's footer again (Rollouts' waterfall
        # at 30M spans: 0.55 s of binding → 0.05 s). Every file a reader reads is immutable (segments and
        # derived parts are replaced by new files, never rewritten), and DuckDB re-reads a footer whose file
        # changed anyway.
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET parquet_metadata_cache = true")  # not a connect() option: Parquet loads later
        self.con.execute("SET enable_progress_bar = false")  # else a query over 2 s draws one on stdout
        self._lock = threading.Lock()
        self._raw: dict[str, list[str]] = {name: [] for name in schema.DATASET_NAMES}
        self._states: dict[str, derived.Published] = {}
        self._stale: set[str] = set()
        # How refreshes brought runs' derived state up to date (store.derived.catch_up's answers): for tests
        # and benchmarks.
        self.derivations: Counter[str] = Counter()
        self.derived_how: Counter[str] = Counter()  # of the "derived" ones: "full" or "incremental"
        # Changes whenever what the views read changes (new segments, caught-up derived state): results
        # computed at one version hold until it changes (the dashboard caches by it).
        self.version = 0
        _define(self.con)
        self._views_ready = False  # the first refresh points every view at the store
        self.refresh()

    @property
    def read_paths(self) -> list[str]:
        """Directories the views read from (a sandbox must allow them)."""
        paths = [str(self.store.resolve()), str(_schema_dir()), str(derived.cache_root(self.store))]
        return paths + ([str(_links_dir())] if _links_dir.cache_info().currsize else [])  # made: links in it

    def refresh(self) -> int:
        """Bring the views up to date with the store; returns the number of span segments added."""
        with self._lock:
            for attempt in range(_RETRIES):
                try:
                    return self._refresh()
                except (duckdb.IOException, FileNotFoundError) as e:
                    # A compaction deleted a segment between listing and deriving (DuckDB's IOException, or
                    # pyarrow's FileNotFoundError reading a new segment's footer): list again.
                    if attempt == _RETRIES - 1:
                        raise _store_changed(e) from e
                except (ValueError, duckdb.InvalidInputException) as e:
                    # A file in a run's partition that is not a segment (pyarrow's ArrowInvalid is a ValueError;
                    # pyarrow stays unimported on an open with nothing new): one line naming it, not a traceback.
                    unreadable = store.unreadable_segment(self.store, self._runs())
                    if unreadable is not None:
                        raise unreadable from e
                    if attempt == _RETRIES - 1:
                        raise
                    # No such file now: the one that failed was moved out after it was listed. List again.
        return 0

    def _runs(self) -> list[str]:
        runs = store.run_ids(self.store)
        if self.run_id is None:
            return runs
        return [self.run_id] if self.run_id in runs else []  # unknown: empty views, "Unknown run"

    def _refresh(self) -> int:
        runs = self._runs()
        listed = {
            dataset: {run: [str(p) for p in store.segments(self.store, dataset, run)] for run in runs}
            for dataset in schema.DATASET_NAMES
        }
        states = dict(self._states)
        for run in runs:
            live = [Path(p) for p in listed["spans"][run]]
            held = states.get(run)
            if held is not None and run not in self._stale and derived.up_to_date(held, live):
                continue
            if self.derive:
                state, how = derived.catch_up(
                    self.store, run, derive_run, wait=self.wait, definitions=definitions.digests()
                )
                if state is not None and state.segments != {p.name for p in live}:  # it merged small files
                    listed["spans"][run] = [str(p) for p in store.segments(self.store, "spans", run)]
            else:
                state, how = derived.latest(self.store, run), "read"
            self.derivations[how] += 1
            if how == "derived" and state is not None:
                self.derived_how[state.how] += 1
            self._stale.discard(run)
            if how in ("stale", "read") and (state is None or not derived.up_to_date(state, live)):
                self._stale.add(run)
            if state is not None:
                states[run] = state
        states = {run: s for run, s in states.items() if run in runs}
        raw = {
            dataset: sorted(p for files in per_run.values() for p in files)
            for dataset, per_run in listed.items()
        }
        added = len(set(raw["spans"]) - set(self._raw["spans"]))
        if not self._views_ready or raw != self._raw or states != self._states:
            self._set_views(raw, states)
            self._raw, self._states = raw, states
            self.version = next(_VERSIONS)
            self._views_ready = True
        return added

    def _set_views(self, raw: dict[str, list[str]], states: dict[str, derived.Published]) -> None:
        cur = self.con.cursor()
        raw_views(
            cur,
            [*raw["spans"], schema_file("spans")],
            [*raw["collector_stats"], schema_file("collector_stats")],
            [*raw["messages"], schema_file("messages")],
        )
        sqlfiles.execute(cur, "transcripts/message_segments", fill={"files": raw["messages"]})
        published = [s.file_names() for _, s in sorted(states.items())]  # once per run, not once per table
        recorded = next(  # a manifest's columns, else the shipped ones (derived_schemas)
            (s.meta["schemas"] for s in states.values() if isinstance(s.meta.get("schemas"), dict)), {}
        )
        for name in TABLE_NAMES:
            files = [f for tables in published for f in tables.get(name, ())]
            table = f"_{name}_mat"
            if not files:  # no run has rows of it (an empty store, no rollout in flight): empty, typed
                _empty_view(cur, table, recorded.get(name) or derived_schemas.current()[name])
                continue
            union = not _one_schema(states.values(), name)
            fill = {"table": table, "files": files, "union_by_name": union}
            sqlfiles.execute(cur, "raw/derived_files", fill=fill)

    # --- querying -----------------------------------------------------------------------------------------

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection for one thread (the views are shared by every cursor)."""
        return self.con.cursor()

    def sql(self, text: str, params: list | dict | None = None):
        """Run one query; errors come back as QueryError keeping the SQL."""
        try:
            return self.retrying(lambda: self.cursor().execute(text, params).df())
        except duckdb.Error as e:
            raise QueryError("Query failed", sqlfiles.first_line(e), sql=text, params=params) from e

    def retrying(self, answer: Callable[[], T]) -> T:
        """``answer()``, asked again after a refresh when it found a segment that a compaction moved aside
        since the last refresh (``store.compaction``): a failed attempt failed whole, so no partial answer. The
        missing file shows as DuckDB's IOException, or as the cause of the QueryError an analysis raises
        (``sqlfiles.run``). Up to ``_RETRIES`` attempts: on a busy machine under a short grace period a second
        attempt can lose the race too. Then a one-line StoreError, never DuckDB's traceback."""
        for attempt in range(_RETRIES):
            try:
                return answer()
            except (duckdb.IOException, QueryError) as e:
                missing = e if isinstance(e, duckdb.IOException) else e.__cause__
                if not isinstance(missing, duckdb.IOException):
                    raise
                if attempt == _RETRIES - 1:
                    raise _store_changed(missing) from e
            self.refresh()
        raise AssertionError("the last attempt returns or raises")  # for type checkers: never reached

    @property
    def runs(self) -> list[str]:
        """The runs whose segments the views read now (the store's, or ``run_id``'s alone)."""
        return sorted({store.run_of(p) for p in self._raw["spans"]})

    def segment_count(self, dataset: str = "spans") -> int:
        return len(self._raw[dataset])

    def derived_state(self, run_id: str) -> derived.Published | None:
        """The published derived state this reader reads for ``run_id``."""
        return self._states.get(run_id)


def _store_changed(missing: Exception) -> StoreError:
    """What a reader says when every attempt lost its files to a compaction: one line, never a traceback."""
    return StoreError(
        "Store changed while reading",
        f"{sqlfiles.first_line(missing)} ({_RETRIES} attempts, each on a new listing: a compaction kept "
        "deleting files it had listed); run it again",
    )


def connect(
    store_dir: Path | str, *, materialize: bool = False, run_id: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every documented view over ``store_dir`` (a store with no runs yet: empty
    views). A path that does not exist is a StoreError, as for every command: a mistyped path in a notebook
    would otherwise answer every query with nothing."""
    store.require_store(store_dir)
    return Reader(store_dir, materialize=materialize, run_id=run_id).con
