"""SQL lives in ``queries/sql/**.sql`` and is loaded by name, so every query can be read and reused as SQL.

``run(con, name, **params)`` is the one way a file of SQL is run: DuckDB splits it into statements
(``duckdb.extract_statements``, which knows strings and comments) and each statement gets the named
``$parameters`` it uses, by DuckDB's own reading of it; a failure becomes a ``QueryError`` keeping the SQL.
``run(con, name, over=(outer, series))`` runs a file with its last query's rows read by another file's query
(an analysis and its rolling mean, as one statement: one round trip, not two).

What cannot be a bound parameter (a relation's name, the literal list of files a view reads: views take no
parameters) is an ``@placeholder`` in the file, filled by ``run(con, name, fill={...})`` before DuckDB parses
it, each value quoted by its type (``filled``): a name as a quoted identifier, a list of paths as a list of
string literals, a bool as true / false, an int as a number, None as NULL, and a ``Fragment`` (SQL our own
code composed: a select list, a condition, another file's query) as it is; a placeholder the caller does not
fill is an error. A file is split once (``statements``, cached: its placeholders parse as stand-ins), and each
call fills its statements' text, so a filled file costs DuckDB's one parse of each statement, not two.
"""

from __future__ import annotations

import itertools
import math
import re
import warnings
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


def _split(text: str) -> tuple[Statement, ...]:
    """DuckDB's statements of ``text``, each with its ``$parameters`` and whether it answers with rows. A file
    with ``@placeholders`` is parsed with each standing in for what it will be filled with, a name (``"@x"``),
    a query (``(SELECT '@x')``) or a clause that may be empty (``/*@x*/``), whichever of them lets DuckDB parse
    it, and its statements are given back with the placeholders as they were, to be filled at each call."""
    names = sorted(set(_PLACEHOLDER.findall(text)))
    if not names:
        return _parsed(text)
    for kinds in itertools.product(_STAND_INS, repeat=len(names)):
        stand_in = dict(zip(names, kinds, strict=True))
        try:
            parsed = _parsed(_PLACEHOLDER.sub(lambda m, chosen=stand_in: chosen[m[1]].format(m[1]), text))
        except duckdb.ParserException:
            continue
        return tuple(
            (_uncommented(_STOOD_IN.sub(_placeholder, sql)), used, rows) for sql, used, rows in parsed
        )
    raise ValueError(f"no stand-ins for the placeholders {names} let DuckDB parse {text[:200]!r}")


_STAND_INS = ('"@{}"', "(SELECT '@{}')", "/*@{}*/")
_STOOD_IN = re.compile(r"\"@(\w+)\"|\(SELECT '@(\w+)'\)|/\*@(\w+)\*/")


def _placeholder(match: re.Match) -> str:
    return "@" + next(group for group in match.groups() if group)


def _uncommented(sql: str) -> str:
    """``sql`` with the placeholders its comments name left unfilled (their ``@`` dropped): a header saying what
    ``@query`` is must not take a query of several lines into a ``--`` comment."""
    tokens = duckdb.tokenize(sql)
    kept, last = [], 0
    for i, (start, kind) in enumerate(tokens):
        if kind == duckdb.token_type.comment:
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
            kept += [sql[last:start], _PLACEHOLDER.sub(r"\1", sql[start:end])]
            last = end
    return "".join(kept) + sql[last:]


def _parsed(text: str) -> tuple[Statement, ...]:
    return tuple(
        (s.query, frozenset(s.named_parameters), s.type in _ROWS) for s in duckdb.extract_statements(text)
    )


@cache
def statements(name: str, over: Over | None = None) -> tuple[Statement, ...]:
    """The statements of one file, each with the names of the ``$parameters`` it uses (DuckDB's parse) and
    whether it answers with rows. With ``over=(outer, series)`` the last one, a query, is read by the file
    ``outer``'s query as ``analysis``: ``WITH analysis AS (...) <outer>``, one statement (an outer query with
    its own ``WITH`` gets ``analysis`` as its first table expression). With a ``series`` (a
    column name, or "NULL"), ``analysis`` also has ``_series`` (that column) and ``_position`` (the row's place
    in the result), for a figure computed along each series in order (``analyses/rolling_mean.sql``)."""
    parsed = _split(load(name))
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


class Fragment(str):
    """SQL text our own code composed (a select list, a condition, a query of another file), filled into a
    placeholder as it is. Never built from data: a value is a bound parameter, a name a plain str."""


Fill = Mapping[str, "str | bool | int | None | Fragment | Sequence[str | Path]"]
_PLACEHOLDER = re.compile(r"@(\w+)")
_PARAMETER = re.compile(r"\$(\w+)")


def filled(text: str, fill: Fill) -> str:
    """``text`` with each ``@name`` replaced by ``fill[name]`` quoted for SQL: a str is an identifier (a table
    or view's name, double-quoted), a bool true / false, an int a number, None NULL, a ``Fragment`` itself, a
    list or tuple of paths a list of string literals. Raises KeyError for a placeholder ``fill`` lacks,
    TypeError for a value of another type."""
    return _PLACEHOLDER.sub(lambda m: _quoted(m[1], fill[m[1]]), text)


def identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (a table's, a view's or a column's), whatever characters it holds."""
    return '"' + name.replace('"', '""') + '"'


def _quoted(name: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "NULL"
    if isinstance(value, Fragment):
        return str(value)
    if isinstance(value, str):
        return identifier(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in value) + "]"
    raise TypeError(
        f"@{name}: a name, a bool, an int, a Fragment or a list of paths, not {type(value).__name__}"
    )


def _filled_statements(name: str, fill: Fill) -> tuple[Statement, ...]:
    """``statements`` of the file with ``fill``'s values in place: the cached split, filled (no parse). A
    ``Fragment`` may name ``$parameters`` of its own: the statement holding it then uses those too."""
    return tuple(
        (filled(sql, fill), used | _fragment_parameters(sql, fill), rows)
        for sql, used, rows in statements(name)
    )


def _fragment_parameters(sql: str, fill: Fill) -> frozenset[str]:
    return frozenset(
        p
        for placeholder in _PLACEHOLDER.findall(sql)
        if isinstance(value := fill.get(placeholder), Fragment)
        for p in _PARAMETER.findall(value)
    )


@cache
def _fragment_text(name: str) -> str:
    """A fragment file's SQL: its text less the header's comment lines and any final semicolon."""
    lines = load(name).strip().splitlines()
    while lines and lines[0].lstrip().startswith("--"):
        lines.pop(0)
    return "\n".join(lines).rstrip().rstrip(";")


def fragment(name: str, **fill) -> Fragment:
    """The SQL of a fragment file (a query or a condition that is not run by itself but filled into another
    file's placeholder: ``with_block.sql``), its placeholders filled (``filled``)."""
    return Fragment(filled(_fragment_text(name), fill))


def parameters(name: str, over: Over | None = None) -> frozenset[str]:
    """Every ``$parameter`` the file's statements use (``over``: as in ``statements``)."""
    return frozenset().union(*(used for _, used, _ in statements(name, over)))


def frame(result: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """A query's rows as a pandas frame (what ``run`` answers by default)."""
    return result.df()


def arrow_table(result: duckdb.DuckDBPyConnection):
    """A query's rows as an Arrow table, typed exactly as DuckDB typed them (rows that SQL reads again)."""
    return result.to_arrow_table()


# DuckDB warns that Arrow output from an executed statement copies the rows once more: for the few hundred
# thousand rows ``arrow_table`` reads, milliseconds, not worth a second way of running a file. Ignored for this
# module only (DuckDB names its caller), set once: a filter set around each call would race between threads.
warnings.filterwarnings("ignore", "Arrow output on a DB-API result", UserWarning, re.escape(__name__) + "$")


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


def execute_statement(con, statement: Statement, /, **params) -> None:
    """One of a file's ``statements`` (a caller choosing among them: derive_full.sql's, table by table), given
    the parameters it names."""
    sql, used, _ = statement
    con.execute(sql, {key: params.get(key) for key in used} or None)


def fetchall(result: duckdb.DuckDBPyConnection) -> list[tuple]:
    """A query's rows as tuples (a ``fetch`` for ``execute``)."""
    return result.fetchall()


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
