"""A process derives many runs and opens many readers (a dashboard catching up live runs, `rollscope derive
--all`, this test suite): the first derivation database, and the first reader, create their definitions,
binding every view and macro, and keep them in a file in the user's cache that later ones, in any process,
copy in (``queries/definition_cache.py``). A copy must be what creating gives, and a cache that is emptied,
damaged or cannot be written must cost only the time."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.fixtures.derived_rows import derived
from benchmarks.fixtures.seeded_runs import write_run
from rollscope.queries import Reader, definition_cache, derive_db, derived_schemas
from tests.test_reader_incremental import fresh

# Every object a derivation's database holds, as DuckDB lists it: views and tables by their bound columns and
# types, macros by their parameters and text (a view's text is not compared: DuckDB writes an EXCLUDE list in
# another order when it copies it, the same columns).
CATALOG = """
SELECT 'column', table_name || '.' || column_name, data_type FROM duckdb_columns()
UNION ALL
SELECT 'macro', function_name, parameters::VARCHAR || ' ' || coalesce(macro_definition, '')
FROM duckdb_functions() WHERE NOT internal AND function_type IN ('macro', 'table_macro')
  AND macro_definition NOT LIKE '%EXCLUDE%'
UNION ALL
SELECT 'macro', function_name, parameters::VARCHAR FROM duckdb_functions()
WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND macro_definition LIKE '%EXCLUDE%'
ORDER BY ALL
"""


@pytest.fixture
def first_in_process(monkeypatch, tmp_path):
    """As in a new process with a new cache: no definitions kept yet. Lists the connections that created
    them rather than copy them: True for a derivation's (False when binding every definition, without
    schemas), "reader" for a reader's."""
    created = []
    define, copy_into = derive_db._define, definition_cache.copy_into

    def counted(con, schemas):
        created.append(schemas is not None)
        return define(con, schemas)

    def copied(con, kept):
        done = copy_into(con, kept)
        if kept.name.startswith("definitions-reader-") and not done:
            created.append("reader")
        return done

    monkeypatch.setenv("ROLLSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(derive_db, "_define", counted)
    monkeypatch.setattr(definition_cache, "copy_into", copied)
    return created


def test_a_processs_later_derivations_copy_the_first_ones_definitions_and_derive_the_same(
    first_in_process, tmp_path
):
    write_run(tmp_path / "written", "exp-7", seed=3, steps=3)
    first = derived(fresh(tmp_path / "written"), "exp-7")
    later = derived(fresh(tmp_path / "written"), "exp-7")

    assert first_in_process.count(True) == 1  # the second derivation copied them
    assert later == first and sum(map(len, first.values())) > 0


def test_copied_definitions_are_the_created_ones(first_in_process, tmp_path):
    schemas = derived_schemas.shipped()
    catalogs = []
    for _ in range(2):
        with derive_db.connection(tmp_path, schemas) as con:
            catalogs.append(con.execute(CATALOG).fetchall())

    assert first_in_process == [True]
    assert catalogs[1] == catalogs[0] and len(catalogs[0]) > 1000


def test_a_reader_that_copied_its_definitions_reads_what_one_that_created_them_reads(
    first_in_process, tmp_path
):
    write_run(tmp_path / "store", "exp-7", seed=3, steps=3)
    readers = [Reader(tmp_path / "store") for _ in range(2)]

    assert first_in_process.count("reader") == 1  # the second reader copied the first one's
    created, copied = (r.con.execute(CATALOG).fetchall() for r in readers)
    assert copied == created
    query = "SELECT environment, count(*), sum(reward) FROM rollouts GROUP BY ALL ORDER BY ALL"
    assert readers[1].sql(query).equals(readers[0].sql(query)) and len(readers[0].sql(query)) > 0


def test_kept_definitions_removed_or_damaged_are_created_again(first_in_process, tmp_path):
    """Someone empties the cache, or a file there is not what DuckDB reads: the next derivation creates the
    definitions again and keeps them anew; nothing is left in its staging folder."""
    schemas = derived_schemas.shipped()
    staging = tmp_path / "staging"
    staging.mkdir()
    with derive_db.connection(staging, schemas):
        pass
    (kept,) = (tmp_path / "cache").glob("definitions-derive-*.duckdb")

    kept.unlink()
    with derive_db.connection(staging, schemas) as con:
        assert con.execute("SELECT count(*) FROM _rollouts_mat").fetchone() == (0,)
    kept.write_bytes(b"not a DuckDB file")
    with derive_db.connection(staging, schemas) as con:
        assert con.execute("SELECT count(*) FROM _rollouts_mat").fetchone() == (0,)
    with derive_db.connection(staging, schemas):
        pass

    assert first_in_process == [True, True, True]  # and the fourth copied the third's
    assert list(staging.iterdir()) == []


def test_a_cache_that_cannot_be_written_leaves_each_derivation_its_own_definitions(
    first_in_process, tmp_path, monkeypatch
):
    (tmp_path / "a-file").write_text("a file where the cache's folder would be")
    monkeypatch.setenv("ROLLSCOPE_CACHE", str(tmp_path / "a-file" / "cache"))
    staging = tmp_path / "staging"
    staging.mkdir()
    for _ in range(2):
        with derive_db.connection(staging, derived_schemas.shipped()) as con:
            assert con.execute("SELECT count(*) FROM _rollouts_mat").fetchone() == (0,)

    assert first_in_process == [True, True]
    assert list(staging.iterdir()) == []


def test_a_file_left_by_a_process_killed_while_keeping_definitions_is_removed_later(
    first_in_process, tmp_path
):
    """A process killed mid-write leaves its dot-named file; the next one to keep definitions removes it once
    it is an hour old (a younger one may be another process's, still writing)."""
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    cache.mkdir()
    staging.mkdir()
    stale, young = cache / ".definitions-derive-0-dead", cache / ".definitions-derive-0-busy"
    for left in (stale, young):
        left.write_bytes(b"half a file")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))

    with derive_db.connection(staging, derived_schemas.shipped()):
        pass

    assert not stale.exists() and young.exists()
    assert len(list(cache.glob("definitions-derive-*.duckdb"))) == 1
