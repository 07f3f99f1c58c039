"""SQL lives in ``queries/sql/**.sql`` and is loaded by name, so every query can be read and reused as SQL."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).parent / "sql"


@cache
def load(name: str) -> str:
    """``load("views/rollouts")`` is the text of ``queries/sql/views/rollouts.sql``."""
    path = SQL_DIR / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no SQL file {path}")
    return path.read_text()


def statements(name: str) -> list[str]:
    """The statements of one file, for running them one by one with parameters."""
    return [part.strip() for part in load(name).split(";\n") if part.strip() and not _only_comments(part)]


def run_statements(con, name: str, params: dict) -> None:
    """Run a file's statements in order, each given the parameters it names (DuckDB refuses extra ones)."""
    for statement in statements(name):
        used = {k: v for k, v in params.items() if re.search(rf"\${k}\b", statement)}
        con.execute(statement, used or None)


def _only_comments(text: str) -> bool:
    return all(line.strip().startswith("--") or not line.strip() for line in text.splitlines())


def folder(name: str) -> list[str]:
    """Names of a folder's files in the order they must run (file names sort by dependency)."""
    return [f"{name}/{p.stem}" for p in sorted((SQL_DIR / name).glob("*.sql"))]


def run_folder(con, name: str) -> None:
    for item in folder(name):
        con.execute(load(item))
