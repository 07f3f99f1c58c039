"""The SQL explorer's connection: the documented views over one store, and nothing else a query can reach.

Three independent layers, so a hole in one is not a hole in the sandbox:

1. Only statements that read run (``SELECT``, ``FROM``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``,
   ``EXPLAIN``); ``COPY``, ``CREATE``, ``INSERT``, ``ATTACH``, ``SET``, ``INSTALL`` … are refused before DuckDB
   sees them, because DuckDB alone would let ``COPY … TO`` write *inside* the allowed directories.
2. The connection is its own DuckDB instance (settings are per instance, so the dashboard's connection is
   untouched) locked down by ``sql/sandbox/lock_down.sql``: only the store is readable, no other file or
   network access, configuration locked so no statement can turn it back on.
3. A row limit (rows are fetched up to it, never all) and a time limit (a timer thread interrupts the query).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from rollscope.errors import QueryError
from rollscope.queries import sqlfiles
from rollscope.queries.reader import Reader

DEFAULT_ROW_LIMIT = 10_000
DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_MEMORY_LIMIT = "2GB"
READING_STATEMENTS = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)


class SandboxRefusal(QueryError):
    """A statement the explorer will not run; the message says why and what is allowed."""


@dataclass(frozen=True)
class SandboxResult:
    frame: pd.DataFrame
    truncated: bool  # the query had more rows than the row limit; only the first row_limit are kept
    seconds: float


class Sandbox:
    """One store opened for untrusted SQL. Queries run one at a time (the timer interrupts this connection)."""

    def __init__(
        self,
        store: Path | str,
        *,
        row_limit: int = DEFAULT_ROW_LIMIT,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        derive: bool = True,
        first_run: str | None = None,
    ):
        """``derive=False``: never derive a run; its derived views hold what other readers published (the
        dashboard, which derives the runs it shows). ``first_run``: open only that run (the one on screen),
        and bind the store's other runs when the first query runs: the views list and a query's answer cover
        every run, but opening the explorer on a store of a hundred runs costs the one shown."""
        self.row_limit = row_limit
        self.time_limit_s = time_limit_s
        # Views over the raw segments and the derived Parquet: nothing is loaded, refresh() re-lists them.
        self._reader = Reader(Path(store).resolve(), derive=derive, run_id=first_run)
        self._lock = threading.Lock()
        _lock_down(self._reader.con, self._reader.read_paths, memory_limit)

    def query(self, sql: str) -> SandboxResult:
        """Run one reading statement over the current segments of every run; refusals and failures raise
        QueryError."""
        statement = reading_statement(sql)
        with self._lock:
            self._reader.run_id = None  # every run of the store from the first query on (a no-op after)
            self._reader.refresh()
            started = time.perf_counter()
            frame, truncated = self._fetch(statement, sql)
            return SandboxResult(frame, truncated, time.perf_counter() - started)

    def runs(self) -> list[str]:
        """The runs the views read now: ``first_run`` alone until the first query, then every run."""
        with self._lock:
            return self._reader.runs

    def columns(self) -> dict[str, list[str]]:
        """Each documented view's columns, read from this connection's own views (no second reader)."""
        from rollscope.queries.catalog import view_columns

        with self._lock:
            return view_columns(self._reader.con)

    def _fetch(self, statement: str, sql: str) -> tuple[pd.DataFrame, bool]:
        con = self._reader.con
        timer = threading.Timer(self.time_limit_s, con.interrupt)
        timer.start()
        try:
            # Again on a fresh listing if a compaction moved a segment aside since the refresh.
            frame = self._reader.retrying(lambda: con.sql(statement).limit(self.row_limit + 1).df())
        except duckdb.Error as e:
            raise _explain(e, sql, self.time_limit_s) from e
        finally:
            timer.cancel()
        return frame.head(self.row_limit), len(frame) > self.row_limit

    def close(self) -> None:
        self._reader.con.close()


def _lock_down(con: duckdb.DuckDBPyConnection, read_paths: list[str], memory_limit: str) -> None:
    sqlfiles.execute(con, "sandbox/lock_down", memory_limit=memory_limit, read_paths=read_paths)


def one_statement(sql: str, syntax_title: str = "Syntax error") -> duckdb.Statement:
    """The one statement in ``sql``; an empty text (blank or comments only) or several statements are a
    QueryError with a one-line message, never a traceback or a silently dropped result."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(syntax_title, sqlfiles.first_line(e), sql=sql) from e
    if not statements:
        raise QueryError(
            "Empty query",
            "there is no SQL here, only blanks or comments; write a query, e.g. SELECT * FROM runs",
            sql=sql,
        )
    if len(statements) > 1:
        raise QueryError(
            "One statement at a time",
            f"this text holds {len(statements)} statements; run them one at a time (for a script, "
            "`rollscope views` gives the views to the plain duckdb CLI)",
            sql=sql,
        )
    return statements[0]


def reading_statement(sql: str) -> str:
    """The text of the one statement in ``sql``, provided it only reads; otherwise a QueryError."""
    statement = one_statement(sql)
    if statement.type not in READING_STATEMENTS:
        kind = statement.type.name.replace("_", " ")
        raise SandboxRefusal(
            "Read-only",
            f"{kind} statements are refused: the explorer is read-only and its settings are locked. "
            "Use SELECT, FROM, WITH, DESCRIBE, SHOW, SUMMARIZE or EXPLAIN over the documented views.",
            sql=sql,
        )
    return statement.query


def _explain(error: duckdb.Error, sql: str, time_limit_s: float) -> QueryError:
    """DuckDB's error as a message that says what the sandbox did and what the user can do."""
    if isinstance(error, duckdb.InterruptException):
        return QueryError(
            "Time limit",
            f"the query ran longer than {time_limit_s:g} s and was stopped; filter by run_id or add a LIMIT",
            sql=sql,
        )
    if isinstance(error, duckdb.PermissionException):
        return SandboxRefusal(
            "Outside the store",
            f"the explorer reads only the store's views, no other file or network: {sqlfiles.first_line(error)}",
            sql=sql,
        )
    return QueryError("Query failed", sqlfiles.first_line(error), sql=sql)
