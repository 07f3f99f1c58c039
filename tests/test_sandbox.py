"""The SQL explorer's sandbox: the store's views are there, nothing else is, and no query can change that."""

from __future__ import annotations

import time

import pytest

from benchmarks.fixtures.seeded_runs import RunWriter, write_run
from rollscope.errors import QueryError
from rollscope.queries.reader import Reader
from rollscope.queries.sandbox import Sandbox, SandboxRefusal


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("sandbox") / "store"
    write_run(store, "exp-7", steps=2)
    return store


@pytest.fixture
def sandbox(store):
    box = Sandbox(store, row_limit=50, time_limit_s=1.0)
    yield box
    box.close()


def refusal(sandbox: Sandbox, sql: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        sandbox.query(sql)
    return caught.value


def test_views_and_the_stores_own_files_are_readable(sandbox, store):
    assert sandbox.query("SELECT count(*) AS n FROM rollouts").frame["n"].tolist() == [32]
    files = f"{store}/spans/run_id=exp-7/*.parquet"
    direct = sandbox.query(f"SELECT count(*) AS n FROM read_parquet('{files}') WHERE name = 'rl.rollout'")
    assert direct.frame["n"].tolist() == [32]
    assert sandbox.query("DESCRIBE turns").frame["column_name"].str.contains("new_input_tokens").any()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_parquet('{outside}/spans/*/*.parquet')",
        "SELECT * FROM read_csv('{store}/../outside.csv')",
        "SELECT * FROM read_csv('{store}/link/secret.csv')",
    ],
)
def test_files_outside_the_store_are_refused(sandbox, store, tmp_path, sql):
    outside = tmp_path / "other-store"
    write_run(outside, "exp-1", steps=1)
    (store.parent / "outside.csv").write_text("secret\n1\n")
    (tmp_path / "secret.csv").write_text("secret\n1\n")
    link = store / "link"
    link.unlink(missing_ok=True)
    link.symlink_to(tmp_path)  # a symlink inside the store that leads out of it
    try:
        error = refusal(sandbox, sql.format(store=store, outside=outside))
    finally:
        link.unlink()
    assert isinstance(error, SandboxRefusal)
    assert error.title == "Outside the store"
    assert "reads only the store's views" in str(error)


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("COPY (SELECT 1) TO '/tmp/rollscope-sandbox-escape.csv'", "COPY"),
        ("COPY rollouts TO '{store}/inside.csv'", "COPY"),
        ("EXPORT DATABASE '{store}/export'", "EXPORT"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("INSERT INTO rollouts SELECT * FROM rollouts", "INSERT"),
        ("ATTACH '/tmp/rollscope-sandbox.duckdb' AS other", "ATTACH"),
        ("ATTACH '{store}/inside.duckdb' AS other", "ATTACH"),
        ("SET enable_external_access = true", "SET"),
        ("RESET lock_configuration", "SET"),
        ("SET VARIABLE rollscope_spans_files = ['/etc/passwd']", "SET"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
    ],
)
def test_writes_attach_and_settings_are_refused(sandbox, store, sql, kind):
    error = refusal(sandbox, sql.format(store=store))
    assert isinstance(error, SandboxRefusal)
    assert error.title == "Read-only"
    assert str(error).startswith(f"{kind} statements are refused")
    assert not list(store.glob("inside*")) and not (store / "export").exists()


def test_the_connection_itself_is_locked_down(sandbox):
    settings = sandbox.query(
        "SELECT current_setting('enable_external_access') AS external, "
        "current_setting('lock_configuration') AS locked"
    ).frame
    assert settings.to_dict("records") == [{"external": False, "locked": True}]


def test_one_statement_at_a_time(sandbox):
    error = refusal(sandbox, "SELECT 1; COPY (SELECT 1) TO '/tmp/x.csv'")
    assert error.title == "One statement at a time"


@pytest.mark.parametrize("sql", ["", "  ", "-- only a comment"])
def test_an_empty_query_says_so_plainly(sandbox, sql):
    error = refusal(sandbox, sql)
    assert error.title == "Empty query" and "only blanks or comments" in str(error)


def test_rows_stop_at_the_row_limit(sandbox):
    result = sandbox.query("SELECT * FROM range(1000000)")
    assert len(result.frame) == 50 and result.truncated
    assert not sandbox.query("SELECT * FROM range(50)").truncated


def test_a_long_query_is_stopped_at_the_time_limit_and_the_sandbox_goes_on(sandbox):
    started = time.monotonic()
    error = refusal(sandbox, "SELECT count(*) FROM range(1000000000000)")
    assert error.title == "Time limit"
    assert "longer than 1 s" in str(error)
    assert time.monotonic() - started < 5
    assert sandbox.query("SELECT 42 AS answer").frame["answer"].tolist() == [42]


def test_bad_sql_is_a_clear_error(sandbox):
    assert refusal(sandbox, "SELEC 1").title == "Syntax error"
    assert "nope" in str(refusal(sandbox, "SELECT * FROM nope"))


def test_new_segments_are_visible_to_the_next_query(tmp_path):
    store = tmp_path / "live"
    writer = RunWriter(store, "live-1", seed=2)
    writer.write_step()
    writer.flush()
    box = Sandbox(store)
    assert box.query("SELECT count(*) AS n FROM rollouts").frame["n"].tolist() == [16]
    writer.write_step()
    writer.flush()
    assert box.query("SELECT count(*) AS n FROM rollouts").frame["n"].tolist() == [32]
    writer.shutdown()
    box.close()


def test_the_explorer_opens_on_the_run_shown_and_its_queries_read_every_run(tmp_path):
    """A store of many runs (issue 11 item 6): opening the explorer binds the run on screen alone, so it costs
    that run; the first query binds the others, so a query still answers over every run."""
    store = tmp_path / "store"
    for i in range(3):
        write_run(store, f"run-{i}", seed=i, steps=1, spec=False)
    every = Reader(store)  # every run derived, as dashboards that showed them left them
    box = Sandbox(store, derive=False, first_run="run-1")
    assert box.runs() == ["run-1"]
    assert "new_input_tokens" in box.columns()["turns"]
    per_run = (
        "SELECT run_id, count(*) AS n, sum(reward) AS reward FROM rollouts GROUP BY run_id ORDER BY run_id"
    )
    answer = box.query(per_run).frame
    assert answer["run_id"].tolist() == ["run-0", "run-1", "run-2"] == box.runs()
    assert answer.to_dict("list") == every.sql(per_run).to_dict("list")
    box.close()
