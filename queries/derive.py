"""Deriving one run's tables (``store/derived.py`` declares them) from its raw segments, as Parquet files.

The store layer decides when a run needs deriving, holds the run's lock and publishes the result; this module
runs the SQL. It opens its own DuckDB database under a memory limit, spilling to a directory inside the store
layer's temporary one, so the tables being built and every join, window and sort that builds them spill to
disk instead of growing with the run: memory is bounded by ``ROLLSCOPE_DERIVE_MEMORY`` (default 1 GB of DuckDB
buffers) whatever the run's length. The definitions are the views and macros the analyses have always used
(``sql/views``, ``sql/analyses/macros``), filled in order by ``sql/raw/derive_full.sql``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb

from rollscope.queries import sqlfiles
from rollscope.store import layout
from rollscope.store.derived import TABLES

MEMORY_LIMIT = os.environ.get("ROLLSCOPE_DERIVE_MEMORY", "1GB")
THREADS = int(os.environ.get("ROLLSCOPE_DERIVE_THREADS", "0")) or min(4, os.cpu_count() or 1)


def sql_list(paths) -> str:
    """A literal SQL list of file paths (views cannot take parameters)."""
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def raw_views(con, spans: list, collector_stats: list) -> None:
    text = sqlfiles.load("raw/raw_views")
    text = text.replace("@spans_files", sql_list(spans)).replace(
        "@collector_stats_files", sql_list(collector_stats)
    )
    con.execute(text)


def stored_columns(con, name: str) -> str:
    """The select list that stores derived table ``name`` as Parquet, which has no 128-bit integers: FLOP
    sums (HUGEINT) keep every digit as DECIMAL(38, 0) rather than becoming DOUBLE."""
    columns = con.execute(f"DESCRIBE _{name}_mat").fetchall()
    return ", ".join(
        f'CAST("{c}" AS DECIMAL(38, 0)) AS "{c}"' if t == "HUGEINT" else f'"{c}"' for c, t, *_ in columns
    )


def derive(segments: list[Path], run_id: str, out: Path) -> None:
    """Write ``<table>.parquet`` for every derived table of ``run_id`` into ``out``, from ``segments``.

    A compaction may move a listed segment aside while this runs (``store.compaction``): then it derives
    again from the same files where they now are, the same rows, so the listing it was given stays true."""
    while True:
        try:
            return _derive(segments, run_id, out)
        except duckdb.IOException:
            moved = layout.resolve(segments)
            if moved is None or moved == segments:
                raise  # gone for good: the caller lists again
            segments = moved


def _derive(segments: list[Path], run_id: str, out: Path) -> None:
    from rollscope.queries.reader import schema_file

    work = out / ".work"
    work.mkdir()
    con = duckdb.connect(
        ":memory:",
        config={
            "memory_limit": MEMORY_LIMIT,
            "threads": THREADS,
            "temp_directory": str(work / "spill"),
            "preserve_insertion_order": False,
        },
    )
    try:
        # Views bind (and list their files) when created: create them over the empty schema file, then point
        # the raw views at the run's segments.
        raw_views(con, [schema_file("spans")], [schema_file("collector_stats")])
        sqlfiles.run_folder(con, "views")
        sqlfiles.run_folder(con, "analyses/macros")
        sqlfiles.execute(con, "raw/derived_tables")
        sqlfiles.execute(con, "raw/derived_views")
        raw_views(con, [*map(str, segments), schema_file("spans")], [schema_file("collector_stats")])
        sqlfiles.execute(con, "raw/derive_full", run=run_id)
        for table in TABLES:
            name = table.name
            select = stored_columns(con, name)
            target = str(out / f"{name}.parquet").replace("'", "''")
            # Per-step tables in step order: a step range reads only the row groups holding its steps.
            order = " ORDER BY step NULLS LAST" if table.scope == "step" else ""
            con.execute(
                f"COPY (SELECT {select} FROM _{name}_mat{order}) TO '{target}' "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)"
            )
    finally:
        con.close()
        shutil.rmtree(work, ignore_errors=True)
