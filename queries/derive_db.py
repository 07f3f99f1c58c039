"""The database a derivation runs in: DuckDB under the derivation's memory limit, with the definitions, the
empty derived tables and the raw views, and the helpers that read Parquet parts into it.

Apart from the ways of deriving (``derive``: full, ``catch_up``: incremental, ``refresh``: the "run" tables)
because every one of them opens it the same way, and its fixed cost (binding the definitions, ``connection``)
is what a catch-up's shortest path pays.

The derivation's own statements (beyond the definitions) are files of ``sql/raw/derive/``, run through
``sqlfiles``; not ``sql/raw/`` itself, whose files are part of ``derived_schemas``' key. Left inline here: the
``SET enable_progress_bar`` setting of a new connection, which is not a query.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import duckdb

from rollscope.queries import definition_cache, sqlfiles
from rollscope.queries.tables import TABLES


def sql_list(paths) -> str:
    """A literal SQL list of file paths (views cannot take parameters)."""
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


_MACRO = re.compile(r"CREATE OR REPLACE MACRO (\w+)")


@cache
def analysis_macros(*, definitions: bool) -> tuple[sqlfiles.Statement, ...]:
    """The statements of ``sql/analyses/macros`` to run after ``raw/derived_views.sql``: all but the macros
    the derived views define (they read the derived tables instead), and with ``definitions`` False also
    without the definitions over raw spans (``*_src``, ``*_staged``), which only a derivation runs."""
    replaced = set(_MACRO.findall(sqlfiles.load("raw/derived_views")))
    kept = []
    for name in sqlfiles.folder("analyses/macros"):
        for statement in sqlfiles.statements(name):
            match = _MACRO.search(statement[0])
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


def typed_nulls(columns: list[list[str]], *, stored: bool = False) -> str:
    """A select list of NULLs typed as ``columns`` (name, DuckDB type) say, each as its own name; with ``stored``,
    typed as the column's Parquet holds it (``stored_type``): what an empty table is made of."""
    return ", ".join(
        f"CAST(NULL AS {stored_type(t) if stored else t}) AS {sqlfiles.identifier(c)}" for c, t in columns
    )


def stored(con, relation: str, skip: tuple[str, ...] = ()) -> str:
    """The select list that stores ``relation`` as Parquet, which has no 128-bit integers: FLOP sums (HUGEINT)
    keep every digit as DECIMAL(38, 0) rather than becoming DOUBLE."""
    columns = describe(con, relation)
    return ", ".join(
        _cast(c, stored_type(t)) if stored_type(t) != t else sqlfiles.identifier(c)
        for c, t, *_ in columns
        if c not in skip
    )


def _cast(column: str, to: str) -> str:
    """A select-list item: ``column`` cast to type ``to``, keeping its name."""
    name = sqlfiles.identifier(column)
    return f"CAST({name} AS {to}) AS {name}"


def describe(con, relation: str) -> list[tuple]:
    """``relation``'s columns (name, type, ...), as DuckDB's DESCRIBE gives them (``relation``: a name)."""
    return sqlfiles.execute(con, "raw/derive/describe", fetch=sqlfiles.fetchall, fill={"relation": relation})


def column_names(con, relation: str) -> set[str]:
    return {c for c, *_ in describe(con, relation)}


def table_names(con) -> set[str]:
    """The names of the tables (not views) in ``con``'s database."""
    return {name for (name,) in sqlfiles.execute(con, "raw/derive/table_names", fetch=sqlfiles.fetchall)}


@contextmanager
def connection(staging: Path, schemas: dict | None = None, *, memory: int = 0, threads: int = 0):
    """A DuckDB database with the definitions and the empty derived tables (``_<table>_mat``).

    DuckDB binds a table macro when it is created, through every view and macro it reads: creating the
    definitions over raw spans, then the empty tables typed by them, costs seconds (~2.5 s, most of a
    catch-up's fixed cost). Given ``schemas`` (each table's columns and types: the shipped ones,
    ``derived_schemas``, or those the run's manifest keeps), the tables are created from them, the derived
    views over them first, and then the macros the derived views do not replace (``analysis_macros``), which
    bind against the tables, not the definitions beneath them: the same definitions in the end, at a fraction
    of the binding (``_define``); and once created they are kept in the user's cache, which the next
    connection with the same definitions copies them from (``_catalog``). ``memory`` (bytes) and ``threads``:
    DuckDB's limits (default: the derivation's, ``Settings.derive_memory_bytes`` and ``derive_cores``); each
    connection spills to a folder of its own (a full derivation's pieces share the staging directory)."""
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
        if schemas is None:
            _define(con, None)
        else:
            _catalog(con, schemas)
        yield con
    finally:
        con.close()
        shutil.rmtree(work, ignore_errors=True)


def _define(con, schemas: dict | None) -> None:
    """Create the definitions in ``con``: with ``schemas``, the empty tables typed from them (``connection``);
    without, each table from its definition, which binds everything beneath it (``bound_schemas``)."""
    from rollscope.queries.reader import schema_file

    sqlfiles.execute(con, "raw/derive/macros")
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
            fill = {"table": f"_{name}_mat", "columns": sqlfiles.Fragment(typed_nulls(columns))}
            sqlfiles.execute(con, "raw/derive/create_typed", fill=fill)
        sqlfiles.execute(con, "raw/derived_views")
        for statement in analysis_macros(definitions=True):
            sqlfiles.execute_statement(con, statement)
    sqlfiles.execute(con, "raw/trace_index")


def _catalog(con, schemas: dict) -> None:
    """The definitions over ``schemas`` in ``con``: copied from the user's cache where a connection with the
    same definitions, in this process or another, kept them (``definition_cache``), else created (``_define``)
    and kept there for the next."""
    from rollscope.queries.reader import schema_file

    texts = [definition_cache.source(__file__), schema_file("spans"), json.dumps(schemas, sort_keys=True)]
    texts += [sqlfiles.load(n) for n in ("raw/derive/macros", "raw/raw_views", *sqlfiles.folder("views"))]
    texts += [sqlfiles.load(n) for n in ("raw/derive/create_typed", "raw/derived_views", "raw/trace_index")]
    texts += [statement for statement, _, _ in analysis_macros(definitions=True)]
    definition_cache.copy_or_create(con, "derive", texts, lambda: _define(con, schemas))


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
    return {t.name: [[name, kind] for name, kind, *_ in describe(con, f"_{t.name}_mat")] for t in TABLES}


def segment_ranges(con, segments: list[Path]) -> dict[str, list[int]]:
    """Each segment's first start and last end, by name."""
    from rollscope.queries.reader import schema_file

    if not segments:
        return {}
    # the empty schema segment too: a foreign writer's segment may lack columns (start_ns, end_ns)
    fill = {"files": hive_paths([*segments, schema_file("spans")])}
    rows = sqlfiles.execute(con, "raw/segment_ranges", fetch=sqlfiles.fetchall, fill=fill)
    return {name: [int(lo), int(hi)] for name, lo, hi, _ in rows if lo is not None}


def ranges_table(con, ranges: dict[str, list[int]]) -> None:
    """_ranges(segment, lo_ns, hi_ns): each segment's first start and last end (ranges.sql)."""
    segments = list(ranges)
    los, his = [ranges[n][0] for n in segments], [ranges[n][1] for n in segments]
    sqlfiles.execute(con, "raw/derive/ranges", segments=segments, los=los, his=his)


def view(con, name: str, files: list[Path], *, schema: str | None = None) -> None:
    """A view over Parquet parts (none: the empty table ``schema``), with the types the definitions give: a
    FLOP sum stored as DECIMAL(38, 0) (``stored``) reads back as the HUGEINT it was."""
    if not files:
        sqlfiles.execute(con, "raw/derive/view_empty", fill={"name": name, "schema": schema})
        return
    paths = [str(f) for f in files]
    columns = sqlfiles.execute(
        con, "raw/derive/describe_parts", fetch=sqlfiles.fetchall, fill={"files": paths}
    )
    select = ", ".join(
        _cast(c, "HUGEINT") if t == "DECIMAL(38,0)" else sqlfiles.identifier(c) for c, t, *_ in columns
    )
    fill = {"name": name, "select": sqlfiles.Fragment(select), "files": paths}
    sqlfiles.execute(con, "raw/derive/view_parts", fill=fill)
