"""SQL lives in ``queries/sql/**.sql`` and is loaded by name, so every query can be read and reused as SQL.

``run(con, name, **params)`` is the one way a file of SQL is run: DuckDB splits it into statements
(``duckdb.extract_statements``, which knows strings and comments) and each statement gets the named
``$parameters`` it uses, by DuckDB's own reading of it; a failure becomes a ``QueryError`` keeping the SQL.
``run(con, name, over=(outer, series))`` runs a file with its last query's rows read by another file's query
(an analysis and its rolling mean, as one statement: one round trip, not two).

What cannot be a bound parameter (a relation's name, the literal list of files a view reads: views take no
parameters) is an ``@placeholder`` in the file, filled by ``run(con, name, fill={...})`` before DuckDB parses
it, each value quoted by its type (``filled``): a name as a quoted identifier, a list of paths as a list of
string literals, a bool as true / false; a placeholder the caller does not fill is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from rollscope.errors import QueryError

if TYPE_CHECKING:  # pandas is imported by DuckDB when a frame is asked for: `rollscope advise` never needs it
    import pandas as pd

SQL_DIR = Path(__file__).parent / "sql"


@cache
def load(name: str) -> str:
    """``load("views/rollouts")`` is the text of ``queries/sql/views/rollouts.sql``."""
    path = SQL_DIR / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no SQL file {path}")
    return path.read_text()


_ROWS = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)  # statements answering with rows


Statement = tuple[str, frozenset[str], bool]


Over = tuple[str, str | None]  # (outer file, series): see ``statements``


@cache
def statements(name: str, over: Over | None = None) -> tuple[Statement, ...]:
    """The statements of one file, each with the names of the ``$parameters`` it uses (DuckDB's parse) and
    whether it answers with rows. With ``over=(outer, series)`` the last one, a query, is read by the file
    ``outer``'s query as ``analysis``: ``WITH analysis AS (...) <outer>``, one statement (an outer query with
    its own ``WITH`` gets ``analysis`` as its first table expression). With a ``series`` (a
    column name, or "NULL"), ``analysis`` also has ``_series`` (that column) and ``_position`` (the row's place
    in the result), for a figure computed along each series in order (``analyses/rolling_mean.sql``)."""
    parsed = tuple(
        (s.query, frozenset(s.named_parameters), s.type in _ROWS)
        for s in duckdb.extract_statements(load(name))
    )
    if over is None:
        return parsed
    outer, series = over
    if not (series is None or series == "NULL" or series.isidentifier()):
        raise ValueError(f"series must be a column name or NULL, not {series!r}")
    (*first, (last, used, _)), (wrapper,) = parsed, statements(outer)
    if series is not None:
        last = f"SELECT *, {series} AS _series, row_number() OVER () AS _position FROM ({last})"
    own = _LEADING_WITH.match(wrapper[0])
    read_by = f",\n{wrapper[0][own.end() :]}" if own else f"\n{wrapper[0]}"
    return (*first, (f"WITH analysis AS ({last}){read_by}", used | wrapper[1], True))


_LEADING_WITH = re.compile(r"\A(?:\s*--[^\n]*\n)*\s*WITH\s+(?!RECURSIVE\b)", re.IGNORECASE)


Fill = Mapping[str, "str | bool | Sequence[str | Path]"]
_PLACEHOLDER = re.compile(r"@(\w+)")


def filled(text: str, fill: Fill) -> str:
    """``text`` with each ``@name`` replaced by ``fill[name]`` quoted for SQL: a str is an identifier (a table
    or view's name, double-quoted), a bool true / false, a list or tuple of paths a list of string literals.
    Raises KeyError for a placeholder ``fill`` lacks, TypeError for a value of another type."""
    return _PLACEHOLDER.sub(lambda m: _quoted(m[1], fill[m[1]]), text)


def _quoted(name: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in value) + "]"
    raise TypeError(f"@{name}: a name, a bool or a list of paths, not {type(value).__name__}")


def _filled_statements(name: str, fill: Fill) -> tuple[Statement, ...]:
    """``statements`` of the file once filled (parsed at each call: the values differ each time)."""
    return tuple(
        (s.query, frozenset(s.named_parameters), s.type in _ROWS)
        for s in duckdb.extract_statements(filled(load(name), fill))
    )


def parameters(name: str, over: Over | None = None) -> frozenset[str]:
    """Every ``$parameter`` the file's statements use (``over``: as in ``statements``)."""
    return frozenset().union(*(used for _, used, _ in statements(name, over)))


def frame(result: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """A query's rows as a pandas frame (what ``run`` answers by default)."""
    return result.df()


# DuckDB types a frame holds as float64: a first_row gives them as floats too, so both answers are the same.
_FLOAT_IN_FRAMES = ("HUGEINT", "UHUGEINT", "DECIMAL")


def first_row(result: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """A query's first row as plain Python values ({} without rows), read without pandas, the same values
    ``analyses.record`` reads from its frame: HUGEINT (``sum`` of integers) and DECIMAL as float, NULL and NaN
    as None."""
    row = result.fetchone()
    return {} if row is None else _row_reader(result)(row)


def all_rows(result: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """A query's rows as ``first_row`` reads its first, read without pandas."""
    read = _row_reader(result)
    return [read(row) for row in result.fetchall()]


def _row_reader(result: duckdb.DuckDBPyConnection) -> Callable[[tuple], dict[str, Any]]:
    names = [(column[0], str(column[1]).startswith(_FLOAT_IN_FRAMES)) for column in result.description]
    return lambda row: {
        name: _plain(value, as_float) for (name, as_float), value in zip(names, row, strict=True)
    }


def _plain(value, as_float: bool):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value) if as_float else value


def run(
    con,
    name: str,
    /,
    *,
    title: str = "Query failed",
    over: Over | None = None,
    fetch: Callable[[duckdb.DuckDBPyConnection], Any] = frame,
    fill: Fill | None = None,
    **params,
):
    """Run the file's statements in order on ``con``, each given the parameters it names (a name it uses
    that ``params`` lacks is NULL; the others are not passed, DuckDB refuses extra ones). Returns the last
    statement's result as ``fetch`` reads it (a frame; ``first_row``: a dict) when it is a query, else None. A
    DuckDB error raises QueryError(``title``, its first line), keeping the file's SQL and the parameters, with
    the DuckDB error as its cause. ``over``: the last query read by another file's (``statements``); ``fill``:
    the file's @placeholders (``filled``)."""
    try:
        return execute(con, name, over=over, fetch=fetch, fill=fill, **params)
    except duckdb.Error as e:
        bound = {key: params.get(key) for key in parameters(name, over)}
        sql = load(name) if over is None else ";\n".join(s for s, _, _ in statements(name, over))
        sql = sql if fill is None else filled(sql, fill)
        raise QueryError(title, first_line(e), sql=sql, params=bound) from e


def execute(
    con,
    name: str,
    /,
    over: Over | None = None,
    fetch: Callable[[duckdb.DuckDBPyConnection], Any] = frame,
    fill: Fill | None = None,
    **params,
):
    """``run`` without the QueryError: DuckDB's own errors, for the store's internals that act on them (a
    reader lists segments again on an IOException, racing macro creators ignore a TransactionException)."""
    if fill is not None and over is not None:
        raise ValueError("fill and over together are not supported")
    answer = None
    for sql, used, rows in statements(name, over) if fill is None else _filled_statements(name, fill):
        result = con.execute(sql, {key: params.get(key) for key in used} or None)
        answer = fetch(result) if rows else None
    return answer


def first_line(error: Exception) -> str:
    """A DuckDB error as one line (its message's first), or the error's type when it has no message."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def folder(name: str) -> list[str]:
    """Names of a folder's files in the order they must run (file names sort by dependency)."""
    return [f"{name}/{p.stem}" for p in sorted((SQL_DIR / name).glob("*.sql"))]


def run_folder(con, name: str) -> None:
    """Run every file of a folder in order (views, macros: statements without parameters). Each file goes to
    DuckDB whole, not split first: without parameters there is nothing to bind per statement, and splitting
    (a parse of its own) cost a reader's open 0.03 s of CPU for the views alone."""
    for item in folder(name):
        con.execute(load(item))
