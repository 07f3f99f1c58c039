"""Each derived table is declared once (queries/tables.py): the repetitive SQL is generated from the declarations
and kept equal to them, the store layer holds no catalogue, and docs/store.md's "Adding a derived table" is true.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from rollscope.queries import definitions, derive_db, sqlfiles, tables
from rollscope.queries.reader import schema_file
from rollscope.queries.tables import TABLES, Table
from rollscope.store import layout
from tests.conftest import ROOT

SAMPLE = ROOT / "sample_data"


def test_generated_sql_equals_the_declarations():
    """derived_tables.sql, derive_full.sql and derived_views.sql are what the declarations generate."""
    assert tables.stale() == [], "the generated SQL differs from queries/tables.py: run `make schemas`"


def test_every_declaration_is_filled_created_and_read_once():
    generated = tables.generated()
    for table in TABLES:
        mat = f"_{table.name}_mat"
        assert generated["raw/derive_full"].count(f"INSERT INTO {mat} ") == 1
        assert generated["raw/derived_tables"].count(f"CREATE TABLE {mat} ") == 1
        assert mat in generated["raw/derived_views"], f"nothing reads {table.name}"


def test_every_source_is_defined_in_a_sql_file():
    """A declaration's source is a view or table macro of sql/views or sql/analyses/macros."""
    defined = set(definitions._definitions())
    for table in TABLES:
        name = re.match(r"\w+", table.source)[0]
        assert name in defined, f"{table.name}: {name} is not defined in queries/sql"


def test_store_layer_holds_no_catalogue():
    """store/ names no query relation: it is told the tables (a derivation's result, a run's manifest)."""
    for path in (ROOT / "store").glob("*.py"):
        text = path.read_text()
        assert "_src" not in text and "TABLES" not in text, path.name


@pytest.mark.parametrize("bad", [{"scope": "step_window"}, {"refresh": "sometimes"}])
def test_a_declaration_of_unknown_scope_or_refresh_is_refused(bad):
    with pytest.raises(ValueError):
        Table("x", ("step",), "x", **{"scope": "run", **bad})


# The example of docs/store.md, "Adding a derived table": one declaration and one .sql file.
EXAMPLE_DECLARATION = Table(
    "turn_counts",
    ("step", "environment"),
    "turns per consuming step and environment",
    scope="step",
)


def _docs_example() -> tuple[str, str]:
    """The declaration and the .sql file docs/store.md shows, as written there."""
    text = (ROOT / "docs" / "store.md").read_text()
    section = text[text.index("## Adding a derived table") :]
    python, sql = re.findall(r"```(?:python|sql)\n(.*?)```", section, re.DOTALL)[:2]
    return python, sql


def test_the_docs_example_is_the_one_tested_here():
    python, _ = _docs_example()
    declared = eval(python.strip().rstrip(","), {"Table": Table})  # noqa: S307 — our own docs, a test
    assert declared == EXAMPLE_DECLARATION


def test_a_new_declaration_and_sql_file_are_picked_up(tmp_path, monkeypatch):
    """The docs' example added: its statements are generated, it is created, filled and read by its macro, and
    it has a definition digest; nothing else is edited."""
    _, sql = _docs_example()
    macros = tmp_path / "sql" / "analyses" / "macros"
    for folder in ("views", "analyses/macros", "raw", "raw/derive"):
        target = tmp_path / "sql" / folder
        target.mkdir(parents=True, exist_ok=True)
        for file in (sqlfiles.SQL_DIR / folder).glob("*.sql"):
            (target / file.name).write_text(file.read_text())
    (macros / "13_turn_counts.sql").write_text(sql)
    declared = (*TABLES, EXAMPLE_DECLARATION)
    monkeypatch.setattr(sqlfiles, "SQL_DIR", tmp_path / "sql")
    monkeypatch.setattr(tables, "TABLES", declared)
    _clear_caches()
    try:
        for name, text in tables.generated(declared).items():
            (tmp_path / "sql" / f"{name}.sql").write_text(text)
        assert "INSERT INTO _turn_counts_mat SELECT $run, * FROM _turn_counts_src($run);" in sqlfiles.load(
            "raw/derive_full"
        )
        run = layout.run_ids(SAMPLE, "spans")[0]
        with derive_db.connection(tmp_path) as con:
            spans = [*map(str, layout.segments(SAMPLE, "spans", run)), schema_file("spans")]
            derive_db.raw_views(con, spans, [schema_file("collector_stats")])
            for statement, used, _ in sqlfiles.statements("raw/derive_full"):
                con.execute(statement, {"run": run} if used else None)
            rows = con.execute("SELECT sum(turns) FROM _turn_counts($run)", {"run": run}).fetchone()[0]
            turns = con.execute("SELECT count(*) FROM _turns_mat").fetchone()[0]
        assert rows == turns > 0
        assert "turn_counts" in definitions._fills()
    finally:
        monkeypatch.undo()
        _clear_caches()


def _clear_caches() -> None:
    for cached in (
        sqlfiles.load,
        sqlfiles.statements,
        sqlfiles._fragment_text,
        definitions._definitions,
        definitions._fills,
    ):
        cached.cache_clear()
    derive_db.analysis_macros.cache_clear()


def test_declarations_are_frozen_values():
    assert dataclasses.is_dataclass(Table) and Table.__dataclass_params__.frozen
