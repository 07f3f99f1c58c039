"""The one runner of SQL files (queries/sqlfiles.py): a file with @placeholders is split once, whatever the
placeholders stand for, each call fills its statements by the values' types, and the derivation's statements
(sql/raw/derive/) all parse."""

from __future__ import annotations

import duckdb
import pytest

from rollscope.queries import sqlfiles


@pytest.fixture
def sql_dir(tmp_path, monkeypatch):
    """A folder of SQL files standing in for queries/sql (the caches cleared before and after)."""
    monkeypatch.setattr(sqlfiles, "SQL_DIR", tmp_path)
    for cached in (sqlfiles.load, sqlfiles.statements, sqlfiles._fragment_text):
        cached.cache_clear()
    yield tmp_path
    monkeypatch.undo()
    for cached in (sqlfiles.load, sqlfiles.statements, sqlfiles._fragment_text):
        cached.cache_clear()


def test_placeholders_for_names_queries_and_clauses_are_split_once_and_given_back(sql_dir):
    (sql_dir / "t.sql").write_text(
        "-- a header naming @target\n"
        "CREATE TABLE @target AS @query;\n"
        "SELECT x FROM @target WHERE x >= $lo @order;\n"
    )
    (create, used_create, rows_create), (select, used_select, rows_select) = sqlfiles.statements("t")
    assert "CREATE TABLE @target AS @query;" in create and not used_create and not rows_create
    assert "-- a header naming target\n" in create  # a comment's placeholder is never filled
    assert select.strip() == "SELECT x FROM @target WHERE x >= $lo @order;"
    assert used_select == {"lo"} and rows_select


def test_a_filled_file_runs_with_values_bound_and_names_quoted(sql_dir):
    (sql_dir / "t.sql").write_text(
        "-- @query, of several lines, is not filled into this comment\n"
        "CREATE TABLE @target AS @query;\nSELECT x FROM @target WHERE x >= $lo @order;\n"
    )
    con = duckdb.connect()
    fill = {
        "target": "my table",
        "query": sqlfiles.Fragment("SELECT range AS x\nFROM range($n)"),
        "order": sqlfiles.Fragment("ORDER BY x DESC"),
    }
    rows = sqlfiles.execute(con, "t", fetch=sqlfiles.fetchall, fill=fill, lo=7, n=10)
    assert rows == [(9,), (8,), (7,)]


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        ('a"b', '"a""b"'),
        (True, "true"),
        (None, "NULL"),
        (12, "12"),
        (sqlfiles.Fragment("x + 1"), "x + 1"),
        (["/a/b.parquet", "it's"], "['/a/b.parquet', 'it''s']"),
    ],
)
def test_each_fill_is_quoted_by_its_type(value, sql):
    assert sqlfiles.filled("@v", {"v": value}) == sql


def test_a_fill_of_another_type_or_a_missing_one_is_refused():
    with pytest.raises(TypeError, match="@v"):
        sqlfiles.filled("@v", {"v": 1.5})
    with pytest.raises(KeyError):
        sqlfiles.filled("@v @w", {"v": "x"})


def test_a_fragment_file_is_its_sql_without_header_or_semicolon(sql_dir):
    (sql_dir / "f.sql").write_text("-- a fragment\n-- of two lines\nSELECT * FROM @relation WHERE @where;\n")
    text = sqlfiles.fragment("f", relation="t", where=sqlfiles.Fragment("x > 1"))
    assert isinstance(text, sqlfiles.Fragment)
    assert text == 'SELECT * FROM "t" WHERE x > 1'


_FRAGMENTS = {  # files of sql/raw/derive filled into other files' placeholders, not run by themselves
    "raw/derive/replace_rows_kept",
    "raw/derive/replace_rows_pending",
    "raw/derive/stepped_select",
    "raw/derive/union",
    "raw/derive/with_block",
    "raw/derive/with_rollout_block",
}


def test_every_derivation_statement_file_parses_and_has_a_header():
    names = sqlfiles.folder("raw/derive")
    assert len(names) > 40 and set(names) >= _FRAGMENTS
    for name in names:
        assert sqlfiles.load(name).startswith("-- "), f"{name}.sql has no header saying what it does"
        if name not in _FRAGMENTS:
            assert sqlfiles.statements(name), name
