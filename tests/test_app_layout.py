"""Where things live in the app: pages hold no SQL and call the analyses themselves, not by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import pytest

APP = Path(__file__).resolve().parent.parent / "app"
PAGES = sorted((APP / "screens").glob("*.py"))


def sql_in(source: str) -> list[str]:
    """The string literals (and f-strings' literal text) of ``source`` that DuckDB parses as SQL."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value if isinstance(v, ast.Constant) else "x" for v in node.values
            )  # a placeholder stands in for each interpolation
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        try:
            if duckdb.extract_statements(text):
                found.append(text)
        except duckdb.Error:  # not SQL: a caption, a label, a key
            pass
    return found


def test_the_detector_finds_sql_in_a_page():
    page = 'import streamlit as st\nst.caption("Usable rollouts")\nq = f"SELECT count(*) FROM rollouts WHERE step > {lo}"\n'
    assert sql_in(page) == ["SELECT count(*) FROM rollouts WHERE step > x"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_page_module_contains_sql(page):
    source = page.read_text()
    assert sql_in(source) == [], f"{page.name} holds SQL: it belongs in a queries/sql/*.sql file"
    calls = {
        n.func.attr
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    assert not calls & {"execute", "sql", "executemany"}, f"{page.name} runs SQL itself"


def test_the_app_looks_nothing_up_by_name():
    """Pages pass analysis functions, so go-to-definition and a typo both end at the function."""
    offenders = [
        f"{path.relative_to(APP)}:{number}"
        for path in sorted(APP.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"importlib|inspect\.signature", line)
    ]
    assert offenders == []
