"""Deriving one run's tables (``queries/tables.py`` declares them) from its raw segments, as Parquet parts.

The store layer decides when a run needs deriving, holds the run's lock and publishes the result; this module
runs the SQL, three ways:

* **full** (``derive_full``): every table from every span of the run, in pieces of consecutive steps derived in
  parallel (``queries/pieces.py``). The reference: used for a run's first catch-up and whenever the incremental
  path cannot be sure (``Fallback``; store/derived.py lists when).
* **tables** (``pieces.derive_tables``): a state whose tables' definitions changed (``queries/definitions.py``)
  takes those tables again from the others' parts, when each of them reads only derived tables.
* **incremental** (``derive_scoped``): the scope the new segments can change (``sql/raw/scope*.sql``: their
  rollouts and traces, their groups, the steps they touch, every rollout and trace of those steps and of the
  not-yet-consumed step NULL), the spans of that scope read from the few segments whose time range meets a
  scoped trace's (the derived trace index ``_traces`` and the segments' time ranges in the manifest), the same
  definitions run over those spans alone (``derive_full.sql``), and each table's rows of the scoped steps
  (or rollouts) replaced, block part by block part; the previous parts of other blocks are reused as they are.

Each opens DuckDB databases of its own under a memory limit, spilling to a directory inside the store layer's
temporary one: memory is bounded by ``ROLLSCOPE_DERIVE_MEMORY`` (``Settings.derive_memory_bytes``: by default a
quarter of the machine's memory, shared by a full derivation's pieces) whatever the run's length. A full
derivation tells its progress to the listener of ``progress``. The definitions are the views and macros the analyses have always used (``sql/views``,
``sql/analyses/macros``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

import duckdb

from rollscope.queries import definitions, derived_schemas, sqlfiles
from rollscope.queries.tables import BY_NAME as _TABLES
from rollscope.queries.tables import TABLES
from rollscope.store import derived, keyed, layout
from rollscope.store.derived import Job, Result, block_of, holds, part_range

log = logging.getLogger("rollscope.derive")

FANOUT = 8  # parts of one tier merged into one by _consolidate
WRITERS = 2  # tables a full derivation writes at once (derive_full)
# the derived index, kept with the tables (not read by analyses)
INDEX = ("_traces", "_trace_keys", "_train_spans")
# The index's parts looked up by key (store/keyed.py), each written sorted by its key: the trace index by trace,
# and its keys (each rollout and group id with the traces that hold it) by id.
KEYED = {"_traces": "trace_id", "_trace_keys": "key"}
# run_percentiles' windows (sql/raw/quantile_windows.sql), kept with the tables like the index; a state
# without them takes them on its next catch-up, which then reads every value once
WINDOWS = "_quantile_windows"
WINDOW_VALUES = 2048  # values a window keeps on each side of its percentile (read at each call: tests set it)
FILLS = re.compile(r"INSERT INTO _(\w+)_mat\b")  # the table a derive_full.sql statement fills
# The trace index's rows of one trace and rollout merged (a later part's supersede an earlier one's, the new
# spans' the parts'): its group, the first start and the last end.
_INDEX_ROWS = (
    "SELECT trace_id, rollout_id, max(group_id) AS group_id, min(lo_ns) AS lo_ns, max(hi_ns) AS hi_ns "
    "FROM {} GROUP BY trace_id, rollout_id"
)
# The trace index's keys of rows ``{}``: each rollout and group id, with a trace whose rows name it (a pair may
# repeat: a lookup takes the distinct traces, and the parts' merges the distinct pairs).
KEY_ROWS = (
    "SELECT rollout_id AS key, trace_id FROM {0} WHERE rollout_id IS NOT NULL "
    "UNION ALL SELECT group_id AS key, trace_id FROM {0} WHERE group_id IS NOT NULL"
)
_IN_STEPS = "(step IS NULL OR step IN (SELECT step FROM _scope_steps))"
_IN_ROLLOUTS = "rollout_id IN (SELECT rollout_id FROM _scope_rollouts)"


class Fallback(Exception):
    """The incremental path cannot be sure of this catch-up: derive the run in full."""


def sql_list(paths) -> str:
    """A literal SQL list of file paths (views cannot take parameters)."""
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


_MACRO = re.compile(r"CREATE OR REPLACE MACRO (\w+)")


@cache
def analysis_macros(*, definitions: bool) -> tuple[str, ...]:
    """The statements of ``sql/analyses/macros`` to run after ``raw/derived_views.sql``: all but the macros
    the derived views define (they read the derived tables instead), and with ``definitions`` False also
    without the definitions over raw spans (``*_src``, ``*_staged``), which only a derivation runs."""
    replaced = set(_MACRO.findall(sqlfiles.load("raw/derived_views")))
    kept = []
    for name in sqlfiles.folder("analyses/macros"):
        for statement, _, _ in sqlfiles.statements(name):
            match = _MACRO.search(statement)
            macro = match.group(1) if match else None
            if macro is None or not (
                macro in replaced or (not definitions and macro.endswith(("_src", "_staged")))
            ):
                kept.append(statement)
    return tuple(kept)


def raw_views(con, spans: list, collector_stats: list, messages: list | None = None) -> None:
    """The raw views over these segments and the schema files (``reader.hive_path``: read with hive
    partitioning, whatever folders the store itself sits in). ``messages`` (the transcripts) defaults to none:
    a derivation reads text only for the transcript flags (``rollout_flags``)."""
    from rollscope.queries.reader import schema_file

    fill = {
        "spans_files": hive_paths(spans),
        "collector_stats_files": hive_paths(collector_stats),
        "messages_files": hive_paths(messages or [schema_file("messages")]),
    }
    sqlfiles.execute(con, "raw/raw_views", fill=fill)


def hive_paths(paths) -> list[str]:
    """Raw segments' paths as read with hive partitioning beside the schema files (``reader.hive_path``)."""
    from rollscope.queries.reader import hive_path

    return [hive_path(str(p)) for p in paths]


def stored_type(duckdb_type: str) -> str:
    """The type a derived column has once stored as Parquet (and read back): HUGEINT as DECIMAL(38, 0)."""
    return "DECIMAL(38, 0)" if duckdb_type == "HUGEINT" else duckdb_type


def stored(con, relation: str, skip: tuple[str, ...] = ()) -> str:
    """The select list that stores ``relation`` as Parquet, which has no 128-bit integers: FLOP sums (HUGEINT)
    keep every digit as DECIMAL(38, 0) rather than becoming DOUBLE."""
    columns = con.execute(f"DESCRIBE {relation}").fetchall()
    return ", ".join(
        f'CAST("{c}" AS {stored_type(t)}) AS "{c}"' if stored_type(t) != t else f'"{c}"'
        for c, t, *_ in columns
        if c not in skip
    )


def _columns(con, relation: str) -> set[str]:
    return {c for c, *_ in con.execute(f"DESCRIBE {relation}").fetchall()}


def _tables(con) -> set[str]:
    """The names of the tables (not views) in ``con``'s database."""
    return {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def derive(job: Job) -> Result:
    """Bring ``job.run_id``'s tables up to date: incrementally from ``job.previous`` when it can be sure,
    else in full. Writes new parts under ``job.staging``.

    A compaction may move a listed segment aside while this runs (``store.compaction``): then it derives
    again, the same way, from the same files where they now are (``layout.resolve``): the same rows, so the
    listing it was given (and the manifest naming it) stays true."""
    while True:
        try:
            return _derive(job)
        except (duckdb.IOException, FileNotFoundError):
            moved, said = layout.resolve(job.live), layout.resolve(job.messages)
            if moved is None or said is None or (moved, said) == (job.live, job.messages):
                raise  # gone for good: the caller lists again
            log.info("run %s: a compaction moved listed segments aside: deriving again", job.run_id)
            _clear(job.staging)
            job = dataclasses.replace(job, live=moved, messages=said)


def _derive(job: Job) -> Result:
    if job.previous is not None and (stale := definitions.changed(job.previous.meta.get("definitions"))):
        # Tables whose definition changed since the state was derived: those that read only other derived
        # tables are derived again from them, when the state holds every live segment; else all, in full.
        if derived.up_to_date(job.previous, job.live) and not any(map(definitions.reads_raw, stale)):
            from rollscope.queries import pieces

            log.info("run %s: definitions changed: deriving %s again", job.run_id, ", ".join(stale))
            return pieces.derive_tables(job, stale)
        log.info("run %s: deriving in full: the definitions of %s changed", job.run_id, ", ".join(stale))
        return derive_full(job)
    if job.previous is not None:
        try:
            return derive_scoped(job)
        except Fallback as why:
            log.info("run %s: deriving in full: %s", job.run_id, why)
        _clear(job.staging)  # what the scoped attempt wrote
    return derive_full(job)


def _clear(staging: Path) -> None:
    for entry in staging.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


@contextmanager
def connection(staging: Path, schemas: dict | None = None, *, memory: int = 0, threads: int = 0):
    """A DuckDB database with the definitions and the empty derived tables (``_<table>_mat``).

    DuckDB binds a table macro when it is created, through every view and macro it reads: creating the
    definitions over raw spans, then the empty tables typed by them, costs seconds (~2.5 s, most of a
    catch-up's fixed cost). Given ``schemas`` (each table's columns and types: the shipped ones,
    ``derived_schemas``, or those the run's manifest keeps), the tables are created from them, the derived
    views over them first, and then the macros the derived views do not replace (``analysis_macros``), which
    bind against the tables, not the definitions beneath them: the same definitions in the end, at a fraction
    of the binding. ``memory`` (bytes) and ``threads``: DuckDB's limits (default: the derivation's,
    ``Settings.derive_memory_bytes`` and ``derive_cores``); each connection spills to a folder of its own (a
    full derivation's pieces share the staging directory)."""
    from rollscope.queries.reader import schema_file
    from rollscope.settings import Settings

    settings = Settings.resolve()
    work = staging / f".work-{secrets.token_hex(4)}"
    work.mkdir()
    con = duckdb.connect(
        ":memory:",
        config={
            "memory_limit": f"{(memory or settings.derive_memory_bytes) // 2**20}MiB",
            "threads": threads or settings.derive_cores,
            "temp_directory": str(work / "spill"),
            "preserve_insertion_order": False,
        },
    )
    try:
        con.execute("SET enable_progress_bar = false")  # else a statement over 2 s draws one on stdout
        # Views bind (and list their files) when created: create them over the empty schema file, then point
        # the raw views at the run's segments.
        raw_views(con, [schema_file("spans")], [schema_file("collector_stats")])
        sqlfiles.run_folder(con, "views")
        if schemas is None:
            sqlfiles.run_folder(con, "analyses/macros")
            sqlfiles.execute(con, "raw/derived_tables")
            sqlfiles.execute(con, "raw/derived_views")
        else:
            for name, columns in schemas.items():
                typed = ", ".join(f'"{c.replace(chr(34), chr(34) * 2)}" {t}' for c, t in columns)
                con.execute(f"CREATE TABLE _{name}_mat ({typed})")
            sqlfiles.execute(con, "raw/derived_views")
            for statement in analysis_macros(definitions=True):
                con.execute(statement)
        sqlfiles.execute(con, "raw/trace_index")
        yield con
    finally:
        con.close()
        shutil.rmtree(work, ignore_errors=True)


def derive_full(job: Job) -> Result:
    """Every table from every span of the run, in pieces of consecutive steps (``queries/pieces.py``), its
    progress told to the ``progress`` listener of this context."""
    from rollscope.queries import pieces

    listener, started = _listener.get(), time.monotonic()
    if listener is None:
        return pieces.derive_full(job)

    def report(fraction: float, what: str) -> None:
        elapsed = time.monotonic() - started
        left = elapsed / fraction * (1 - fraction) if fraction >= 0.1 else None  # once the plan is known
        listener(job.run_id, fraction, what, left)

    return pieces.derive_full(job, report)


# A full derivation's progress, for a command or page that opens a run: (run id, fraction done, what is being
# derived, about how many seconds are left or None while that is not known yet).
Progress = Callable[[str, float, str, float | None], None]
_listener: ContextVar[Progress | None] = ContextVar("rollscope_derive_progress", default=None)


@contextmanager
def progress(listener: Progress):
    """Tell ``listener`` how each full derivation started in this context goes (``Progress``): the command
    line draws a bar on stderr, the dashboard a progress element. An incremental catch-up, seconds at most,
    tells nothing."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def blocks_by_rollout_step(con, name: str) -> bool:
    """Whether table ``name``'s parts are blocked by its rollouts' consuming steps (``with_block``)."""
    table = _TABLES.get(name)
    return bool(table and table.blocked and "step" not in _columns(con, f"_{name}_mat"))


def bound_schemas() -> dict[str, list[list[str]]]:
    """Every derived table's columns and types as binding every definition gives them, in an empty database
    (what ``derived_schemas`` ships)."""
    with (
        tempfile.TemporaryDirectory(prefix="rollscope-schemas-") as staging,
        connection(Path(staging)) as con,
    ):
        return schemas_of(con)


def schemas_of(con) -> dict[str, list[list[str]]]:
    """Every derived table's columns and DuckDB types (HUGEINT, not the DECIMAL it is stored as), for the
    manifest: the next incremental catch-up creates its tables from them (``connection``)."""
    return {
        t.name: [
            list(c)
            for c in con.execute(f"SELECT column_name, column_type FROM (DESCRIBE _{t.name}_mat)").fetchall()
        ]
        for t in TABLES
    }


def segment_ranges(con, segments: list[Path]) -> dict[str, list[int]]:
    """Each segment's first start and last end, by name."""
    from rollscope.queries.reader import schema_file

    if not segments:
        return {}
    # the empty schema segment too: a foreign writer's segment may lack columns (start_ns, end_ns)
    fill = {"files": hive_paths([*segments, schema_file("spans")])}
    rows = sqlfiles.execute(con, "raw/segment_ranges", fetch=_fetchall, fill=fill)
    return {name: [int(lo), int(hi)] for name, lo, hi, _ in rows if lo is not None}


def _fetchall(result) -> list[tuple]:
    return result.fetchall()


def with_block(con, relation: str, where: str = "true") -> str:
    """``relation``'s rows with the block of their step (a table without a step column: its rollout's
    consuming step, from the derived rollout_steps rows) as ``_block``."""
    if "step" in _columns(con, relation):
        return f"SELECT *, {block_sql('step')} AS _block FROM {relation} WHERE {where}"
    # A catch-up's scoped rows, once _read_final has pointed _rollout_steps_mat at the run's every part: the
    # scoped rollout_steps rows (_rollout_steps_scoped) hold the same steps for them, without reading the run's.
    steps = "_rollout_steps_scoped" if "_rollout_steps_scoped" in _tables(con) else "_rollout_steps_mat"
    return (
        f"SELECT t.*, {block_sql('c.step')} AS _block FROM {relation} AS t "
        f"LEFT JOIN (SELECT rollout_id, any_value(step) AS step FROM {steps} GROUP BY ALL) AS c "
        f"USING (rollout_id) WHERE {where.replace('rollout_id', 't.rollout_id', 1)}"
    )


def block_sql(step: str) -> str:
    """SQL for the block label of consuming step ``step`` (``store.derived.block_of``; read at each call, so a
    test may set ``derived.BLOCK_STEPS``)."""
    return f"CASE WHEN {step} IS NULL THEN 'p' ELSE CAST(floor({step} / {derived.BLOCK_STEPS}) AS BIGINT)::VARCHAR END"


def _write_blocked(con, name: str, relation: str, staging: Path) -> list[Path]:
    """Write ``relation`` (rows with ``_block``) as one part per block, ``<name>/b=<block>/<token>.parquet``."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW _writing AS {relation}")
    target = staging / name
    select = stored(con, "_writing", skip=("_block",))
    con.execute(
        f"COPY (SELECT {select}, _block FROM _writing) TO '{quoted(target)}' "
        "(FORMAT parquet, PARTITION_BY (_block), COMPRESSION zstd, ROW_GROUP_SIZE 122880, OVERWRITE_OR_IGNORE)"
    )
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
    order, rows = (f" ORDER BY {key}", keyed.ROW_GROUP_SIZE) if key else ("", 122880)
    con.execute(
        f"COPY (SELECT {stored(con, relation)} FROM {relation}{order}) TO '{quoted(target)}' "
        f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {rows})"
    )
    return target


def quoted(path: Path) -> str:
    return str(path).replace("'", "''")


# --- incremental -------------------------------------------------------------------------------------------


def derive_scoped(job: Job) -> Result:
    """The previous state plus what the new segments change (module docstring); raises Fallback when it
    cannot be sure."""
    from rollscope.queries.reader import schema_file

    previous, run = job.previous, job.run_id
    meta = previous.meta
    if not {"ranges", "spans", "samples"} <= meta.keys() or meta.get("orphans"):
        raise Fallback("the previous state has no index for an incremental catch-up")
    parts = {name: [Path(p) for p in files] for name, files in previous.files().items()}
    # _trace_keys may be missing: a state from before it was kept takes it on this catch-up (_key_index)
    if not set(parts) >= {*(t.name for t in TABLES), *INDEX} - {"_trace_keys"} or any(
        t.scope == "run" and t.refresh is None for t in TABLES
    ):
        raise Fallback("a table without an incremental rule")
    new, ranges, measured = _new_segments(job.live, previous.segments, meta["ranges"])
    if not new:  # only compactions since: the same rows, under the live segments' names
        return Result(parts, {**meta, "ranges": ranges}, "incremental")
    import pyarrow.parquet as pq

    added = sum(pq.read_metadata(p).num_rows for p in new)
    if added > meta["spans"]:
        raise Fallback("more new spans than derived ones")
    schemas = meta.get("schemas")
    if not isinstance(schemas, dict) or set(schemas) != {t.name for t in TABLES}:
        schemas = derived_schemas.shipped()  # a state from before schemas were kept; None: bind, once
    with connection(job.staging, schemas) as con:
        schemas = schemas or schemas_of(con)
        for name in ("_train_spans", "train_steps", "process_activity"):
            view(con, f"_old_{name}", parts[name], schema=f"_{name.lstrip('_')}_mat")
        if "_trace_keys" not in parts:  # a state from before the index was looked up by key
            _key_index(con, job, parts)
        raw_views(con, [*map(str, new), schema_file("spans")], [schema_file("collector_stats")])
        con.execute("CREATE TABLE _new AS SELECT * FROM raw_spans WHERE run_id = $run", {"run": run})
        con.execute("CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _new")
        params = {"run": run, "samples": meta["samples"], "bound": meta["bound"]}
        why = sqlfiles.execute(con, "raw/scope_seed", fetch=sqlfiles.first_row, **params)["fallback"]
        if isinstance(why, str):
            raise Fallback(why)
        ranges.update(segment_ranges(con, measured))
        con.execute(
            "CREATE TABLE _new_process_activity AS SELECT * FROM _process_activity_src($run)", {"run": run}
        )
        con.execute(  # read once, by scope_spans.sql into the scoped spans (_train_spans_mat reads them there)
            "CREATE VIEW _train_all AS SELECT * FROM _old__train_spans UNION ALL BY NAME "
            "SELECT * FROM _new WHERE name IN ('rl.train_step', 'rl.weight_sync')"
        )
        prior = _PriorSteps(con, parts["rollout_steps"])
        _scope_and_derive(con, job, parts, ranges, params, _Index(parts), prior)
        notes: dict = {}
        tables = _merge(con, job, parts, notes, prior)
    meta = {**meta, **notes, "spans": meta["spans"] + added, "ranges": ranges, "schemas": schemas}
    return Result(tables, meta, "incremental")


def _new_segments(
    live: list[Path], derived_from: frozenset[str], ranges: dict
) -> tuple[list[Path], dict, list[Path]]:
    """The files holding the rows the previous state lacks, the time ranges of the live segments it holds (a
    compacted one's is its sources'), and the live segments whose range must be read from their own footer.

    The writers compact while a run is live, and a compaction may merge derived segments with new ones, or
    merge an earlier merge again: a compacted segment is followed down to its first sources (``_sources``,
    through the files a compaction keeps aside for a grace period, ``layout.replaced_path``). Its new rows are
    read from the new sources and its range from its own footer; only when a new source is gone already does
    the catch-up derive in full. Fallback too when a derived segment vanished without a compaction."""
    new, kept, covered, measured = [], {}, set(), []
    for path in live:
        if path.name in derived_from:
            covered.add(path.name)
            kept[path.name] = ranges.get(path.name)
            continue
        sources = _sources(path, derived_from)
        derived_sources = {name for name, _ in sources if name in derived_from}
        fresh = [file for name, file in sources if name not in derived_from]
        covered |= derived_sources
        if not fresh:
            spans = [ranges.get(s) for s in derived_sources]
            kept[path.name] = None if None in spans else [min(r[0] for r in spans), max(r[1] for r in spans)]
            continue
        if not derived_sources:
            new.append(path)
        elif None in fresh:
            raise Fallback("a compaction merged derived and new segments, and a new one is gone")
        else:
            new.extend(fresh)
        measured.append(path)
    if covered != derived_from:
        raise Fallback("a derived segment vanished without a compaction")
    if None in kept.values():
        raise Fallback("a segment without a time range")
    return new, kept, measured


def _sources(path: Path, derived_from: frozenset[str]) -> list[tuple[str, Path | None]]:
    """A live segment's first sources (``derived.first_sources``; itself when no compaction made it), each with
    its file, in place or kept aside by a compaction (None: gone for good; a derived one is not looked for)."""
    found = derived.first_sources(path, derived_from)
    return sorted(found.items()) if found else [(path.name, path)]


def view(con, name: str, files: list[Path], *, schema: str | None = None) -> None:
    """A view over Parquet parts (none: the empty table ``schema``), with the types the definitions give: a
    FLOP sum stored as DECIMAL(38, 0) (``stored``) reads back as the HUGEINT it was."""
    if not files:
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {schema} LIMIT 0")
        return
    source = f"read_parquet({sql_list(files)}, hive_partitioning = false, union_by_name = true)"
    columns = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    select = ", ".join(
        f'CAST("{c}" AS HUGEINT) AS "{c}"' if t == "DECIMAL(38,0)" else f'"{c}"' for c, t, *_ in columns
    )
    con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {select} FROM {source}")


def _blocks(con) -> set[str]:
    return {"p"} | {block_of(s) for (s,) in con.execute("SELECT step FROM _scope_steps").fetchall()}


def _stepped(con, parts: dict[str, list[Path]], blocks: set[str], read: set[Path]) -> None:
    """Add to _stepped(step, rollout_id, trace_id) the previous rows of the blocked tables in ``blocks`` that
    name a rollout or a trace, for scope.sql. The scope's blocks only grow within a catch-up, so each part is
    read once (``read``: the parts read so far; empty on the first call, which creates the table): the scope
    grows over several passes, and reading every part of every scoped block again at each pass was a fifth
    of a small catch-up."""
    if not read:
        con.execute("CREATE OR REPLACE TABLE _stepped (step BIGINT, rollout_id VARCHAR, trace_id VARCHAR)")
    selects = []
    for table in TABLES:
        files = [p for p in parts[table.name] if p not in read and holds(p, blocks)]
        if not table.blocked or not files:
            continue
        read.update(files)
        columns = _columns(con, f"_{table.name}_mat")  # the previous state's columns (derive_scoped)
        if "step" not in columns or not columns & {"rollout_id", "trace_id"}:
            continue
        rollout = "rollout_id" if "rollout_id" in columns else "NULL::VARCHAR"
        trace = "trace_id" if "trace_id" in columns and table.scope == "trace" else "NULL::VARCHAR"
        selects.append(
            f"SELECT DISTINCT step, {rollout} AS rollout_id, {trace} AS trace_id "
            f"FROM read_parquet({sql_list(files)}, hive_partitioning = false)"
        )
    if selects:
        con.execute(f"INSERT INTO _stepped {' UNION ALL '.join(selects)}")


class _Index:
    """The previous state's trace index, looked up by key (``store.keyed``): _idx holds the new spans' rows and,
    once ``fill`` has run, every previous row of the traces the scope looks up (each trace whole), not the
    index of the whole run, which a catch-up used to copy and scan at every pass (1.9 s at 30M spans)."""

    def __init__(self, parts: dict[str, list[Path]]):
        self.traces = keyed.Keyed(parts["_traces"], "trace_id")
        self.keys = keyed.Keyed(parts["_trace_keys"], "key")
        self.seen_traces: set[bytes] = set()
        self.seen_keys: set[str] = set()

    def fill(self, con) -> None:
        """Add to _idx the rows of the traces and ids the scope's next pass looks up (index_wanted.sql), until
        those rows name no id not looked up yet (a rollout's rows give its group, a group's its members)."""
        while True:
            (wanted,) = sqlfiles.execute(con, "raw/index_wanted", fetch=sqlfiles.all_rows)
            keys = list(set(wanted["keys"] or ()) - self.seen_keys)
            traces = set(wanted["traces"] or ()) - self.seen_traces
            self.seen_keys.update(keys)
            for found in self.keys.read(keys):
                held = "SELECT DISTINCT trace_id FROM _found WHERE key IN (SELECT unnest($keys))"
                traces |= {t for (t,) in _with_found(con, found, held, keys=keys)}
            traces -= self.seen_traces
            if not traces:
                return
            self.seen_traces |= traces
            for found in self.traces.read(traces):
                _with_found(
                    con,
                    found,
                    "INSERT INTO _idx SELECT trace_id, rollout_id, group_id, lo_ns, hi_ns FROM _found "
                    "WHERE trace_id IN (SELECT unnest($traces))",
                    traces=list(traces),
                )


def _with_found(con, found, sql: str, **params) -> list[tuple]:
    """The rows of ``sql`` run over the Arrow table ``found`` as _found (fetched before _found goes)."""
    con.register("_found", found)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.unregister("_found")


def _key_index(con, job: Job, parts: dict[str, list[Path]]) -> None:
    """A state whose trace index was not kept sorted by key (from before ``KEYED``): its parts' rows, as they
    are, rewritten as one part sorted by trace, and the keys' part; once, over the whole index (10-15 s at 30M
    spans, most of it sorting 4.5M rows and 6.6M keys)."""
    view(con, "_old__traces", parts["_traces"], schema="_traces_mat")
    con.execute("CREATE OR REPLACE TEMP TABLE _idx_merged AS SELECT * FROM _old__traces")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _keys_merged AS {KEY_ROWS.format('_idx_merged')}")
    parts["_traces"] = [write_whole(con, "_traces", "_idx_merged", job.staging)]
    parts["_trace_keys"] = [write_whole(con, "_trace_keys", "_keys_merged", job.staging)]


class _PriorSteps:
    """_prior_steps(rollout_id, step): the consuming step in the previous state of each rollout the scope can
    name, for scope.sql and ``_replace_rows``.

    A scoped rollout may have moved from a step whose block no scoped step shares (a late group member moves
    its group to a later train step; a recorded decision for another step): its rows at the old step must
    leave that step's aggregates, and a table keyed by rollout must drop its row from the old block's part.
    ``_stepped`` reads only the scoped blocks, so it cannot see that step; rollout_steps' parts can. Only the
    rollouts asked for are read (``fill``, a semi-join over two narrow columns), not every rollout's step
    grouped by rollout, which cost a catch-up 0.4-0.6 s at 30M spans (2.2M rollouts) however little was new."""

    def __init__(self, con, files: list[Path]):
        self.files = files
        con.execute("CREATE OR REPLACE TABLE _prior_steps (rollout_id VARCHAR, step BIGINT)")
        con.execute("CREATE OR REPLACE TABLE _prior_asked (rollout_id VARCHAR)")

    def fill(self, con, rollouts: str) -> None:
        """Add the previous step of each rollout ``rollouts`` (a query of a rollout_id column) names that was not
        asked for before: one scan of rollout_steps' parts when there is one, none when there is not."""
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _prior_wanted AS "
            f"SELECT rollout_id FROM ({rollouts}) WHERE rollout_id IS NOT NULL "
            "EXCEPT SELECT rollout_id FROM _prior_asked"
        )
        if not con.execute("SELECT count(*) FROM _prior_wanted").fetchone()[0]:
            return
        if self.files:
            # one row per rollout (a rollout at two steps, in a part not rewritten yet, keeps one): _replace_rows
            # joins on it
            con.execute(
                "INSERT INTO _prior_steps SELECT rollout_id, any_value(step) "
                f"FROM read_parquet({sql_list(self.files)}, hive_partitioning = false) "
                "WHERE step IS NOT NULL AND rollout_id IN (SELECT rollout_id FROM _prior_wanted) GROUP BY ALL"
            )
        con.execute("INSERT INTO _prior_asked SELECT rollout_id FROM _prior_wanted")


# Every rollout a pass of scope.sql can add to the changed ones: those it reads in _idx and _stepped (filled
# before the pass), and those changed already.
_SCOPE_ROLLOUTS = (
    "SELECT rollout_id FROM _idx UNION ALL SELECT rollout_id FROM _stepped "
    "UNION ALL SELECT rollout_id FROM _scope_changed"
)


def _scope_and_derive(
    con, job: Job, parts, ranges: dict, params: dict, index: _Index, prior: _PriorSteps
) -> None:
    """Grow the scope to its closure, derive it from its spans; again (at most twice) when a scoped rollout
    moved to a step outside the scope (a late group member, a recorded decision for an earlier step).

    Before each pass of scope.sql, ``index.fill`` adds to _idx the previous state's index rows of every id the
    pass looks up: the pass then answers as over the whole index. A pass that adds nothing had every row it
    read, so the scope it stops at is the whole index's, and _idx holds every scoped trace's rows (their time
    ranges, for _scoped_spans): no fill after it would find anything."""
    read: set[Path] = set()
    for _ in range(3):
        size = -1
        while True:
            _stepped(con, parts, _blocks(con), read)
            index.fill(con)
            prior.fill(con, _SCOPE_ROLLOUTS)
            grown = int(sqlfiles.execute(con, "raw/scope", fetch=sqlfiles.first_row)["size"])
            if grown == size:
                break
            size = grown
        _scoped_spans(con, job, ranges, params)
        for table in TABLES:
            con.execute(f"DELETE FROM _{table.name}_mat")
        _derive_scoped_tables(con, job.run_id)
        moved = con.execute(  # the group members read beside the scope keep their steps: not theirs
            "SELECT DISTINCT step FROM _rollout_steps_mat WHERE step IS NOT NULL "
            "AND step NOT IN (SELECT step FROM _scope_steps) "
            "AND rollout_id IN (SELECT rollout_id FROM _scope_rollouts)"
        ).fetchall()
        if not moved:
            return
        log.info("run %s: scoped rollouts moved to steps %s", job.run_id, moved)
        con.executemany("INSERT INTO _scope_steps VALUES (?)", moved)
    raise Fallback("the scope kept growing")


def _derive_scoped_tables(con, run: str) -> None:
    """derive_full.sql over the scoped spans, less the statements of the "run" tables refreshed from the other
    derived tables or merged (their rows from a scope alone would be thrown away)."""
    skipped = tuple(
        f"INTO _{t.name}_mat "
        for t in TABLES
        if t.refresh in ("rederive", "quantiles", "merge", "windows", "tail")
    )
    for sql, used, _ in sqlfiles.statements("raw/derive_full"):
        if not any(marker in sql for marker in skipped):
            con.execute(sql, {"run": run} if used else None)


def _scoped_spans(con, job: Job, ranges: dict, params: dict) -> None:
    """Point raw_spans at the scope's spans, read from the segments whose time range meets a scoped trace's."""
    from rollscope.queries.reader import schema_file

    con.execute("CREATE OR REPLACE TABLE _ranges (segment VARCHAR, lo_ns BIGINT, hi_ns BIGINT)")
    con.executemany("INSERT INTO _ranges VALUES (?, ?, ?)", [(n, lo, hi) for n, (lo, hi) in ranges.items()])
    traces = (
        "SELECT trace_id, min(lo_ns) AS lo, max(hi_ns) AS hi FROM _idx SEMI JOIN _scope_traces USING (trace_id) "
        "GROUP BY trace_id"
    )
    names = {
        n
        for (n,) in con.execute(
            f"SELECT DISTINCT r.segment FROM _ranges AS r JOIN ({traces}) AS t ON r.lo_ns <= t.hi AND r.hi_ns >= t.lo"
        ).fetchall()
    }
    lo, hi = con.execute(f"SELECT min(lo), max(hi) FROM ({traces})").fetchone()
    files = [*(str(p) for p in job.live if p.name in names), schema_file("spans")]
    values = {**params, "lo": lo or 0, "hi": hi or 0}
    sqlfiles.execute(con, "raw/scope_spans", fill={"files": hive_paths(files)}, **values)
    con.execute("CREATE OR REPLACE VIEW raw_spans AS SELECT * FROM _scoped")
    _scoped_messages(con, job, values)


def _scoped_messages(con, job: Job, values: dict) -> None:
    """Point raw_messages at the run's messages of the scope's time range (``values``' lo, hi: every scoped
    trace's spans start in it, and a message starts with its span), read from the segments' row groups of that
    range alone (their start_ns statistics), for the tables derived from transcripts (rollout_flags)."""
    from rollscope.queries.reader import schema_file

    files = hive_paths([*map(str, job.messages), schema_file("messages")])
    sqlfiles.execute(con, "raw/scope_messages", fill={"files": files}, **values)
    con.execute("CREATE OR REPLACE VIEW raw_messages AS SELECT * FROM _scoped_messages")


def _merge(
    con, job: Job, parts: dict[str, list[Path]], notes: dict, prior: _PriorSteps
) -> dict[str, list[Path]]:
    """Every table's parts after the catch-up, in TABLES order (a "rederive" table reads earlier ones); what
    the next catch-up builds on goes into ``notes`` (the manifest's meta)."""
    blocks = _blocks(con)
    tables: dict[str, list[Path]] = {}
    con.execute(  # every train step and weight sync of the run, which the scoped spans hold (scope_spans.sql)
        "CREATE OR REPLACE VIEW _train_spans_mat AS "
        "SELECT * FROM _scoped WHERE name IN ('rl.train_step', 'rl.weight_sync')"
    )
    for table in TABLES:
        started = time.perf_counter()
        if table.blocked:
            tables[table.name] = _replace_rows(con, job, table.name, parts[table.name], blocks, prior)
        elif table.refresh == "whole":
            tables[table.name] = [write_whole(con, table.name, f"_{table.name}_mat", job.staging)]
        elif table.refresh == "merge":
            merge = sqlfiles.load(f"raw/merge_{table.name}")
            con.execute(f"CREATE OR REPLACE TEMP TABLE _merged AS {merge}", {"run": job.run_id})
            tables[table.name] = [write_whole(con, table.name, "_merged", job.staging)]
        elif table.refresh == "windows":
            tables[table.name] = _refresh_windows(con, job, table, tables, parts[table.name], notes)
        elif table.refresh == "tail":
            tables[table.name] = _refresh_tail(con, job, table, tables, parts)
        elif table.refresh == "quantiles":
            tables[table.name], tables[WINDOWS] = _refresh_quantiles(
                con, job, table, tables, parts, blocks, notes
            )
        else:
            tables[table.name] = _rederive(con, job, table, tables)
        log.debug("run %s: %s in %.2f s", job.run_id, table.name, time.perf_counter() - started)
    touched = "(SELECT * FROM _idx SEMI JOIN (SELECT DISTINCT trace_id FROM _new) AS n USING (trace_id))"
    con.execute(f"CREATE OR REPLACE TEMP TABLE _idx_delta AS {_INDEX_ROWS.format(touched)}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _keys_delta AS {KEY_ROWS.format('_idx_delta')}")
    tables["_traces"] = _index_parts(con, job, "_traces", parts["_traces"], "_idx_delta", _INDEX_ROWS)
    tables["_trace_keys"] = _index_parts(
        con, job, "_trace_keys", parts["_trace_keys"], "_keys_delta", "SELECT DISTINCT * FROM {}"
    )
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _train_delta AS "
        "SELECT * FROM _new WHERE name IN ('rl.train_step', 'rl.weight_sync')"
    )
    tables["_train_spans"] = _index_parts(
        con, job, "_train_spans", parts["_train_spans"], "_train_delta", "SELECT * FROM {}"
    )
    return tables


def _index_parts(con, job: Job, name: str, old: list[Path], delta: str, merge: str) -> list[Path]:
    """An index table's parts after a catch-up: the previous ones, and one of ``delta`` (none when it is empty):
    the rows of the traces the new spans touched (for the trace index: their rows over old and new spans merged,
    ``_INDEX_ROWS``, which supersede the earlier rows: a lookup takes each trace's earliest start and latest end
    over every part), or the new train steps and weight syncs. Not the index rewritten whole, which grows with
    the run (the run's train spans, every step's, were 0.5 s of a catch-up at 30M spans).
    Parts are merged (``merge``) tier by tier like the blocked tables' (a part of ``rows`` rows is in tier
    ``floor(log_FANOUT(rows))``; ``FANOUT`` of one tier become one), so the index keeps under ``FANOUT`` parts
    per tier and a row is rewritten at most ``log_FANOUT(rows)`` times."""
    import pyarrow.parquet as pq

    parts = list(old)
    if con.execute(f"SELECT count(*) FROM {delta}").fetchone()[0]:
        parts.append(write_whole(con, name, delta, job.staging))
    while True:
        tiers: dict[int, list[Path]] = {}
        for part in parts:
            rows = max(pq.read_metadata(part).num_rows, 1)
            tiers.setdefault(int(math.log(rows, FANOUT) + 1e-9), []).append(part)
        full = next((group[:FANOUT] for group in tiers.values() if len(group) >= FANOUT), None)
        if full is None:
            return parts
        view(con, "_idx_merging", full, schema=delta)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _idx_merged AS {merge.format('_idx_merging')}")
        merged = write_whole(con, name, "_idx_merged", job.staging)
        parts = [p for p in parts if p not in full] + [merged]


def _replace_rows(
    con, job: Job, name: str, parts: list[Path], blocks: set[str], prior: _PriorSteps
) -> list[Path]:
    """A blocked table's parts: those of the touched blocks rewritten, their rows of the scoped steps (a table
    without a step column: of the scoped rollouts) replaced by the scoped derivation's; the others reused."""
    mat = f"_{name}_mat"
    scope = _IN_STEPS if "step" in _columns(con, mat) else _IN_ROLLOUTS
    old = [p for p in parts if holds(p, blocks)]
    relation = with_block(con, mat, scope)
    kept = [p for p in old if not (scope == _IN_ROLLOUTS and derived.part_block(p) == "p")]
    if kept:
        relation += (
            " UNION ALL BY NAME SELECT * EXCLUDE (filename), "
            "regexp_extract(filename, '/b=([^/]+)/[^/]+$', 1) AS _block "
            f"FROM read_parquet({sql_list(kept)}, filename = true, hive_partitioning = false) WHERE NOT {scope}"
        )
    if pending := [p for p in old if p not in kept]:
        # Its rows of no consuming step (block p), each to the block of its rollout's step in the previous
        # state: p again, unless a full derivation wrote the table before the consuming steps were known
        # (derive_full until it waited for them), which left every row in p for each catch-up to rewrite
        # whole: the rows of consumed rollouts move to their steps' blocks here, once. (In any other state
        # their rollouts were asked for already, the scope reads block p of rollout_steps, and this reads
        # nothing.)
        prior.fill(
            con, f"SELECT rollout_id FROM read_parquet({sql_list(pending)}, hive_partitioning = false)"
        )
        relation += (
            f" UNION ALL BY NAME SELECT o.*, {block_sql('s.step')} AS _block "
            f"FROM read_parquet({sql_list(pending)}, hive_partitioning = false) AS o "
            "LEFT JOIN _prior_steps AS s USING (rollout_id) "
            f"WHERE NOT {scope.replace('rollout_id', 'o.rollout_id', 1)}"
        )
    written = _write_blocked(con, name, relation, job.staging)
    return _consolidate(con, name, [p for p in parts if p not in old] + written, job.staging)


def _refresh_windows(
    con, job: Job, table, tables: dict[str, list[Path]], old: list[Path], notes: dict
) -> list[Path]:
    """A "windows" table (rollout_goodput): its rows of the step windows from the one holding the new spans'
    first start on swept again (refresh_rollout_goodput.sql), the earlier windows' rows kept. Kept as blocks
    of steps like a blocked table, so only the blocks of those windows (and ``p``, time outside every window)
    are rewritten; the processes' bounds come from the manifest merged with the scoped rows'
    (``process_bounds``), not from every turn and rollout of the run."""
    from rollscope.queries.reader import schema_file

    t0 = con.execute(
        "SELECT min(start_ns) FROM _new WHERE name IN ('rl.turn', 'rl.rollout', 'rl.train_step', 'rl.weight_sync')"
    ).fetchone()[0]
    if t0 is None:  # nothing it reads is new
        return old
    _read_final(con, tables)
    previous = job.previous.meta.get("process_bounds") if job.previous is not None else None
    notes["process_bounds"] = process_bounds(con, previous)
    # A process that runs again after a pause was idle, not gone, from its previous last end on: a window from
    # there is swept again too (before, the sweep ended that process's time at its last end).
    last_end = {instance: hi for instance, _, hi, *_ in notes["process_bounds"]}
    resumed = [hi for instance, _, hi, *_ in previous or () if hi is not None and last_end[instance] > hi]
    t0 = min([t0, *resumed])
    # A window starts where its step does: at the first of the step's rows (one per trainer process).
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _old_step_starts AS SELECT train_step, min(start_ns) AS start_ns "
        "FROM _old_train_steps WHERE train_step IS NOT NULL GROUP BY train_step"
    )
    from_ns, first_ns = con.execute(
        "SELECT max(start_ns) FILTER (start_ns <= ?), min(start_ns) FROM _old_step_starts", [t0]
    ).fetchone()
    if from_ns is None:  # before the first window: sweep it all
        return _rederive(con, job, table, tables)
    values = {"run": job.run_id, "from_ns": from_ns, "first_ns": first_ns}
    sqlfiles.execute(con, f"raw/refresh_{table.name}", fill={"schema": [schema_file("spans")]}, **values)
    kept = f"step IN (SELECT train_step FROM _old_step_starts WHERE start_ns < {int(from_ns)})"
    blocks = {"p"} | {
        block_of(s)
        for (s,) in con.execute(
            "SELECT step FROM _merged WHERE step IS NOT NULL UNION SELECT train_step FROM _old_step_starts "
            "WHERE start_ns >= ?",
            [from_ns],
        ).fetchall()
    }
    return _rewrite_blocks(con, job, table.name, old, "_merged", kept, blocks)


def _rewrite_blocks(
    con, job: Job, name: str, parts: list[Path], new: str, kept: str, blocks: set
) -> list[Path]:
    """A table kept in blocks of steps but refreshed by a rule of its own: the parts holding ``blocks`` (or a
    ``b=all`` part of an earlier layout) rewritten as their rows that satisfy ``kept`` plus the ``new`` relation's
    rows; the other parts reused."""
    old = [p for p in parts if derived.part_block(p) == "all" or holds(p, blocks)]
    relation = with_block(con, new)
    if old:
        view(con, f"_old_{name}_touched", old, schema=new)
        relation += f" UNION ALL BY NAME {with_block(con, f'_old_{name}_touched', kept)}"
    written = _write_blocked(con, name, relation, job.staging)
    return _consolidate(con, name, [p for p in parts if p not in old] + written, job.staging)


def process_bounds(con, meta: list | None) -> list[list]:
    """_proc_bounds: each process's first start, last end, devices and whether it ran turns
    (process_bounds.sql) over the final turns and rollouts: the previous state's (``meta``; without them,
    computed from the final tables, once) merged with the scoped rows'. Returns them for the manifest."""
    if meta is None:
        sqlfiles.execute(con, "raw/process_bounds", fill={"turns": "_turns_mat", "rollouts": "_rollouts_mat"})
        con.execute("CREATE OR REPLACE TABLE _proc_bounds AS SELECT * FROM _proc_bounds_of")
    else:
        con.execute(
            "CREATE OR REPLACE TABLE _proc_bounds "
            "(instance_id VARCHAR, lo BIGINT, hi BIGINT, devices DOUBLE, has_turns BOOLEAN)"
        )
        if meta:
            con.executemany("INSERT INTO _proc_bounds VALUES (?, ?, ?, ?, ?)", meta)
        fill = {"turns": "_turns_scoped", "rollouts": "_rollouts_scoped"}
        sqlfiles.execute(con, "raw/process_bounds", fill=fill)
        con.execute(
            "CREATE OR REPLACE TABLE _proc_bounds AS SELECT instance_id, min(lo) AS lo, max(hi) AS hi, "
            "max(devices) AS devices, bool_or(has_turns) AS has_turns "
            "FROM (SELECT * FROM _proc_bounds UNION ALL BY NAME SELECT * FROM _proc_bounds_of) "
            "GROUP BY instance_id"
        )
    return [list(r) for r in con.execute("SELECT * FROM _proc_bounds ORDER BY instance_id").fetchall()]


def _refresh_tail(con, job: Job, table, tables: dict[str, list[Path]], parts: dict) -> list[Path]:
    """A "tail" table (compute_busy): per step, the scoped steps' rows swept again; for the whole run, the
    previous union less its part from the first changed interval on plus the new one's
    (refresh_compute_busy.sql). Kept in blocks of steps like a blocked table (the whole-run rows in ``p``):
    only the scoped steps' blocks are rewritten."""
    for name in ("step_islands", "work", "compute_busy"):
        view(con, f"_old_{name}", parts[name], schema=f"_{name}_mat")
    for name in ("step_islands", "work"):
        view(con, f"_final_{name}", tables[name], schema=f"_{name}_mat")
    (t0,) = con.execute(
        "SELECT min(start_ns) FROM ("
        " SELECT start_ns FROM _old_step_islands WHERE step IN (SELECT step FROM _scope_steps)"
        " UNION ALL SELECT start_ns FROM _old_work WHERE step IS NULL"
        " UNION ALL SELECT start_ns FROM _final_step_islands WHERE step IN (SELECT step FROM _scope_steps)"
        " UNION ALL SELECT start_ns FROM _final_work WHERE step IS NULL)"
    ).fetchone()
    _read_final(con, tables)
    values = {"run": job.run_id, "t0_ns": t0 if t0 is not None else 2**62}
    sqlfiles.execute(con, f"raw/refresh_{table.name}", **values)
    kept = "by_step AND step IS NOT NULL AND step NOT IN (SELECT step FROM _scope_steps)"
    return _rewrite_blocks(con, job, table.name, parts[table.name], "_merged", kept, _blocks(con))


def _read_final(con, tables: dict[str, list[Path]]) -> None:
    """Point the views of the tables written so far at their new parts (the scoped rows stay as _<t>_scoped)."""
    held = _tables(con)
    for done, files in tables.items():
        if f"_{done}_mat" in held:  # not yet a view over its new parts
            con.execute(f"ALTER TABLE _{done}_mat RENAME TO _{done}_scoped")
            view(con, f"_{done}_mat", files, schema=f"_{done}_scoped")


def _rederive(con, job: Job, table, tables: dict[str, list[Path]]) -> list[Path]:
    """A "rederive" table, from the tables written so far (their views now read the new parts) and the raw
    spans those keep (rederive_spans.sql)."""
    from rollscope.queries.reader import schema_file

    _read_final(con, tables)
    sqlfiles.execute(con, "raw/rederive_spans", fill={"schema": [schema_file("spans")]})
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _merged AS SELECT $run AS run_id, * FROM {table.source}",
        {"run": job.run_id},
    )
    return [write_whole(con, table.name, "_merged", job.staging)]


def quantile_windows(con, run: str, percentiles: str) -> None:
    """_quantile_windows_mat: the windows around each of the run's percentiles (``percentiles``, the relation
    holding its run_percentiles rows), taken over every value (quantile_windows.sql)."""
    sqlfiles.execute(con, "raw/quantile_windows", fill={"percentiles": percentiles}, run=run, k=WINDOW_VALUES)


def _refresh_quantiles(
    con, job: Job, table, tables: dict[str, list[Path]], parts: dict, blocks: set[str], notes: dict
) -> tuple[list[Path], list[Path]]:
    """A "quantiles" table (run_percentiles) and its windows: moved by the values the catch-up removed and
    added (refresh_quantiles.sql), which costs those values; when a percentile left its window (or the state
    has no windows), taken again over every value, as the full derivation takes them. Returns both tables'
    parts."""
    _read_final(con, tables)
    if parts.get(WINDOWS):
        view(con, "_qw_old", parts[WINDOWS])
        for name, alias in (
            ("rollout_tails", "_qd_tails"),
            ("turn_latency", "_qd_latency"),
            ("scoring", "_qd_scoring"),
        ):
            relation = f"SELECT 1 AS sign, * EXCLUDE (run_id) FROM _{name}_scoped WHERE {_IN_STEPS}"
            if touched := [p for p in parts[name] if holds(p, blocks)]:  # the rows _replace_rows replaced
                relation += (
                    " UNION ALL BY NAME SELECT -1 AS sign, * EXCLUDE (run_id) "
                    f"FROM read_parquet({sql_list(touched)}, hive_partitioning = false) WHERE {_IN_STEPS}"
                )
            con.execute(f"CREATE OR REPLACE TEMP VIEW {alias} AS {relation}")
        sqlfiles.execute(con, "raw/refresh_quantiles")
        for *key, v0, v1, fraction in con.execute(
            "SELECT all_environments, environment, metric, slot, v0, v1, h - floor(h) FROM _qw_answers "
            "WHERE covered AND n > 0 AND j0 <> j1"
        ).fetchall():
            # quantile_cont of the two values at fraction of the way is the run's own (h of n values), last
            # bit included: DuckDB's interpolation, not an expression of ours that may round differently
            (value,) = con.execute(
                f"SELECT quantile_cont(x, {float(fraction)!r}::DOUBLE) "
                "FROM (VALUES (?::DOUBLE), (?::DOUBLE)) AS t(x)",
                [v0, v1],
            ).fetchone()
            con.execute(
                "UPDATE _qw_answers SET value = ? WHERE all_environments = ? "
                "AND environment IS NOT DISTINCT FROM ? AND metric = ? AND slot = ?",
                [value, *key],
            )
        if sqlfiles.execute(
            con, "raw/quantile_results", fetch=sqlfiles.first_row, run=job.run_id, k=WINDOW_VALUES
        )["kept"]:
            notes["quantiles"] = "windows"
            return (
                [write_whole(con, table.name, "_merged", job.staging)],
                [write_whole(con, WINDOWS, "_quantile_windows_mat", job.staging)],
            )
        log.info("run %s: a percentile left its window: taking them over every value", job.run_id)
    notes["quantiles"] = "every value"
    written = _rederive(con, job, table, tables)
    quantile_windows(con, job.run_id, "_merged")
    return written, [write_whole(con, WINDOWS, "_quantile_windows_mat", job.staging)]


def _consolidate(con, name: str, parts: list[Path], staging: Path) -> list[Path]:
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


def merged_order(name: str) -> str:
    """The ORDER BY of a merged part of table ``name`` (``Table.row_order``; none for a table without one).

    A merged part holds the rows of many blocks, and a block's part is written in no particular order (``COPY
    … PARTITION_BY`` does not keep one); sorted, each row group holds a narrow range of steps (and one grain),
    which a query of a step range or grain skips by its statistics. At 30M spans the report's reads of
    ``prefill_sums`` and ``spec_sums`` went from 1.45M and 1.27M rows to the 0.1–0.2M of the grain each reads.
    The sort is of the parts being merged, spilled to disk past the derivation's memory limit."""
    table = _TABLES.get(name)
    return f" ORDER BY {', '.join(table.row_order)}" if table and table.row_order else ""


def _consolidate_pass(con, name: str, parts: list[Path], staging: Path) -> list[Path]:
    """One pass of ``_consolidate``: every tier's full groups of ``FANOUT`` parts merged once."""
    ranged = sorted((part_range(p), p) for p in parts if part_range(p) is not None)
    merged: dict[Path, Path | None] = {}
    for group in merge_groups([r for r, _ in ranged]):
        first, last = ranged[group[0]][0][0], max(ranged[i][0][1] for i in group)
        files = [ranged[i][1] for i in group]
        target = staging / name / f"b={first}_{last}" / f"{secrets.token_hex(6)}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        source = f"read_parquet({sql_list(files)}, hive_partitioning = false, union_by_name = true)"
        con.execute(
            f"COPY (SELECT * FROM {source}{merged_order(name)}) TO '{quoted(target)}' "
            "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)"
        )
        merged.update({p: None for p in files})
        merged[files[0]] = target
    return [merged.get(p, p) for p in parts if merged.get(p, p) is not None]


def merge_groups(ranges: list[tuple[int, int]]) -> list[list[int]]:
    """The merges one pass of ``_consolidate`` makes of parts holding the sorted block ranges ``ranges``: groups
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
    ``_consolidate`` is done with one part per block: the block ranges of its fixed point. A full derivation
    writes these parts directly (``queries/pieces.py``), so no row is rewritten tier by tier."""
    ranges = [(b, b) for b in blocks]
    while groups := merge_groups(ranges):
        merged = {i: (ranges[g[0]][0], ranges[g[-1]][1]) for g in groups for i in g}
        firsts = {g[0] for g in groups}
        ranges = sorted(merged.get(i, r) for i, r in enumerate(ranges) if i not in merged or i in firsts)
    return ranges
