"""Derived tables on disk: published atomically, caught up once for every reader, safe under kill -9 and
concurrent writers, readers and compaction, readable without rollscope, and kept only for the runs shown."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from benchmarks.fixtures.derived_rows import derived as derived_rows
from benchmarks.fixtures.derived_rows import near
from benchmarks.fixtures.seeded_runs import RunWriter, write_run
from rollscope.app.sidebar import SAMPLE_STORE
from rollscope.queries import analyses, derived_schemas
from rollscope.queries.reader import Reader
from rollscope.queries.tables import TABLES
from rollscope.semconv import FUNNEL_STAGES as STAGES
from rollscope.store import derived, layout
from tests.conftest import ROOT, python, rollscope

RUN = "exp-7"


def raw_copy(store: Path, target: Path) -> Path:
    """The store's raw segments alone, in a new directory: a reader there derives everything from scratch."""
    for dataset in ("spans", "collector_stats"):
        if (store / dataset).is_dir():
            shutil.copytree(store / dataset, target / dataset)
    target.mkdir(exist_ok=True)
    return target


def figures(con, run: str = RUN) -> dict:
    """What a user reads off a run: funnel, compute terms, turn work, staleness (missing values as None,
    floats to 12 significant digits: parallel sums of doubles may differ in the last bits)."""
    return _plain(
        {
            "funnel": analyses.funnel(con, run).to_dict("records"),
            "by_step": analyses.funnel(con, run, by="step").to_dict("records"),
            "compute": analyses.compute_terms(con, run, by="step").to_dict("records"),
            "prefill": analyses.prefill_decode(con, run).to_dict("records"),
            "staleness": analyses.staleness(con, run).to_dict("records"),
            "token_work": analyses.token_work(con, run),
        }
    )


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.12g}")
    return value


def test_derived_state_is_published_in_the_store_and_read_without_deriving_again(tmp_path):
    store = tmp_path / "store"
    write_run(store, RUN, steps=3)
    first = Reader(store, run_id=RUN)
    assert first.derivations == {"derived": 1}
    state = derived.current(store, RUN)
    assert state is not None and state.root.parent == store / "derived"
    assert state.segments == {p.name for p in layout.segments(store, "spans", RUN)}
    assert all(part.is_file() for parts in state.files().values() for part in parts)

    second = Reader(store, run_id=RUN)  # another process opening the run reads what the first published
    assert second.derivations == {"current": 1}
    assert (
        figures(second.con) == figures(first.con) == figures(Reader(raw_copy(store, tmp_path / "fresh")).con)
    )


def test_new_segments_are_caught_up_and_a_compaction_is_not(tmp_path):
    store = tmp_path / "store"
    writer = RunWriter(store, RUN, seed=1)
    writer.write_step()
    writer.flush()
    reader = Reader(store, run_id=RUN)
    writer.write_step()
    writer.flush()
    reader.refresh()
    assert reader.derivations == {"derived": 2}
    layout.compact(store, grace_seconds=0)
    reader.refresh()
    other = Reader(store, run_id=RUN)
    assert reader.derivations == {"derived": 2} and other.derivations == {"current": 1}
    assert figures(reader.con) == figures(Reader(raw_copy(store, tmp_path / "fresh")).con)
    writer.shutdown()


def test_the_bare_duckdb_client_computes_the_funnel_from_the_derived_files(tmp_path):
    """The layout is enough: manifest.json names each table's Parquet parts, relative to the run's directory."""
    store = tmp_path / "store"
    write_run(store, RUN, steps=3)
    expected = analyses.funnel(Reader(store, run_id=RUN).con, RUN).iloc[0]
    code = """
import duckdb, json, sys
store, run = sys.argv[1], sys.argv[2]
part = f"{store}/derived/run_id={run}"
manifest = json.load(open(f"{part}/manifest.json"))
stages = [f"{part}/{rel}" for rel in manifest["tables"]["rollout_stages"]]
row = duckdb.connect().execute(
    "SELECT count(*), count(*) FILTER (completed), count(*) FILTER (scored), count(*) FILTER (nonzero_signal),"
    " count(*) FILTER (fresh), count(*) FILTER (usable) FROM read_parquet(?)", [stages]).fetchone()
print(json.dumps(row, separators=(",", ":")), "rollscope" in sys.modules or any(m.startswith("rollscope") for m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(store), RUN],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    counts, imported = done.stdout.split()
    assert json.loads(counts) == [int(expected[s]) for s in STAGES]
    assert imported == "False"


SLOW_CATCH_UP = """
import sys, time
from rollscope.queries.derive import derive
from rollscope.store import derived

def slow(job):
    derive(job)
    print("derived", flush=True)
    time.sleep(60)  # killed here: every table written, nothing published

derived.catch_up(sys.argv[1], sys.argv[2], slow)
"""


@pytest.mark.long  # kill -9 of a deriving process
def test_kill_9_mid_catch_up_leaves_the_last_state_readable_and_the_next_open_catches_up(tmp_path):
    store = tmp_path / "store"
    writer = RunWriter(store, RUN, seed=2)
    writer.write_step()
    writer.flush()
    before = figures(Reader(store, run_id=RUN).con)
    published = derived.current(store, RUN)
    writer.write_step()
    writer.flush()

    catching_up = python(SLOW_CATCH_UP, str(store), RUN, stdout=subprocess.PIPE, text=True)
    assert catching_up.stdout.readline().strip() == "derived"
    os.kill(catching_up.pid, signal.SIGKILL)
    catching_up.wait()
    assert [p.name for p in published.root.glob(".tmp-*")]  # the interrupted generation, never published

    # Readers that do not derive read the last published state, whole.
    stale = Reader(store, run_id=RUN, derive=False)
    assert stale.derived_state(RUN) == derived.latest(store, RUN)
    assert figures(stale.con) == before
    # The next open takes the lock the killed process held, catches up and removes the leftovers.
    caught_up = Reader(store, run_id=RUN)
    assert caught_up.derivations == {"derived": 1}
    assert not list(published.root.glob(".tmp-*"))
    assert figures(caught_up.con) == figures(Reader(raw_copy(store, tmp_path / "fresh")).con) != before
    writer.shutdown()


def test_a_store_that_cannot_hold_derived_data_derives_into_the_users_cache(tmp_path, monkeypatch):
    store = tmp_path / "store"
    write_run(store, RUN, steps=2)
    (store / "derived").write_text("not a directory: the store refuses derived data")
    monkeypatch.setenv("ROLLSCOPE_CACHE", str(tmp_path / "cache"))
    reader = Reader(store, run_id=RUN)
    state = reader.derived_state(RUN)
    assert state is not None and state.root.is_relative_to(tmp_path / "cache")
    assert figures(reader.con) == figures(Reader(raw_copy(store, tmp_path / "fresh")).con)
    assert Reader(store, run_id=RUN).derivations == {"current": 1}  # found again in the cache


def test_a_dashboard_derives_only_the_runs_it_shows(tmp_path):
    from rollscope.app import readers

    store = tmp_path / "store"
    for i in range(5):
        write_run(store, f"small-{i}", seed=i, steps=1, spec=False)
    live = readers.LiveStore(str(store))
    live.version("small-3")
    assert sorted(p.name for p in (store / "derived").iterdir()) == ["run_id=small-3"]
    readers.LiveStore(str(store)).version("small-1")  # compare: the second run only
    assert sorted(p.name for p in (store / "derived").iterdir()) == ["run_id=small-1", "run_id=small-3"]


def test_a_connection_of_every_run_gives_each_run_the_figures_of_a_connection_of_that_run(tmp_path):
    """A plain ``connect(store)`` of a store of many runs (every run's derived parts in one view per table)
    gives each run the figures a connection of that run alone gives."""
    store = tmp_path / "store"
    runs = [f"small-{i}" for i in range(3)]
    for i, run in enumerate(runs):
        write_run(store, run, seed=i, steps=2, spec=False)
    every = Reader(store).con
    assert sorted(r for (r,) in every.execute("SELECT DISTINCT run_id FROM rollouts").fetchall()) == runs
    for run in runs:
        alone = figures(Reader(store, run_id=run).con, run)
        assert alone["funnel"][0]["dispatched"] > 0
        assert figures(every, run) == alone


def test_a_store_kept_under_key_value_folders_reads_as_it_does_anywhere_else(tmp_path):
    """Experiment outputs often sit under folders like ``lr=1e-5/``, which DuckDB reads as hive partition
    keys: such a store must derive and answer as the same segments do elsewhere (``environment`` is also a
    span column, whose values such a key must not replace)."""
    plain = tmp_path / "plain"
    write_run(plain, RUN, seed=3, steps=2, spec=False)
    nested = raw_copy(plain, tmp_path / "lr=1e-5" / "environment=prod" / "runs")
    assert figures(Reader(nested).con) == figures(Reader(plain).con)
    code, out, err = rollscope(
        "sql", "--store", nested, "--format", "json", "SELECT DISTINCT environment FROM turns"
    )
    assert (code, err) == (0, "") and "prod" not in out and json.loads(out)


def test_a_key_value_store_given_as_a_relative_path_reads_too(tmp_path, monkeypatch):
    """``rollscope report --store lr=1e-5/runs``, typed from the experiment's folder: the same figures as the
    absolute path gives."""
    nested = tmp_path / "lr=1e-5" / "runs"
    write_run(nested, RUN, seed=3, steps=2, spec=False)
    monkeypatch.chdir(tmp_path)
    assert figures(Reader("lr=1e-5/runs").con) == figures(Reader(nested).con)
    code, out, err = rollscope("report", "--store", "lr=1e-5/runs")
    assert (code, err) == (0, "") and f"run {RUN}" in out


def test_the_views_script_of_a_key_value_store_reads_no_folder_as_a_column(tmp_path):
    """``rollscope views`` for the plain duckdb CLI: a store under ``lr=1e-5/environment=prod/`` gives the same
    spans and figures as the same segments elsewhere (no ``lr`` column, ``environment`` left as recorded)."""
    plain = tmp_path / "plain"
    write_run(plain, RUN, seed=3, steps=2, spec=False)
    nested = raw_copy(plain, tmp_path / "lr=1e-5" / "environment=prod" / "runs")
    queries = [
        "SELECT * EXCLUDE (run_id), run_id FROM raw_spans ORDER BY span_id",
        "SELECT environment, count(*), sum(reward) FROM rollouts GROUP BY ALL ORDER BY ALL",
    ]
    answers = []
    for store in (plain, nested):
        code, script, err = rollscope("views", "--store", store)
        assert (code, err) == (0, "")
        con = duckdb.connect()
        con.execute(script)
        answers.append([con.sql(q).fetchall() for q in queries])
        assert "lr" not in con.sql("SELECT * FROM raw_spans LIMIT 0").columns
    assert answers[0] == answers[1]
    assert answers[1][1] and "prod" not in {row[0] for row in answers[1][1]}


# --- many readers while writers publish and compaction runs --------------------------------------------------

WRITE = """
import sys, time
from benchmarks.fixtures.seeded_runs import RunWriter
# Two job processes, one of them the trainer (two trainers would both write each step).
writer = RunWriter(sys.argv[1], sys.argv[2], seed=int(sys.argv[3]), prefix=sys.argv[3] + "-", trainer=sys.argv[3] == "1")
writer.step = 1  # the run's step 0 is written already
for _ in range(int(sys.argv[4])):
    writer.write_step()
    writer.flush()
    time.sleep(0.2)
writer.shutdown()
"""

COMPACT = """
import sys, time
from rollscope.store import layout
deadline = time.time() + float(sys.argv[2])
while time.time() < deadline:
    layout.compact(sys.argv[1], grace_seconds=1)
    time.sleep(0.3)
"""

READ = """
import sys, time
from rollscope.queries.reader import Reader
from rollscope.queries import analyses
reader = Reader(sys.argv[1], run_id=sys.argv[2], wait=sys.argv[3] == "wait")
deadline, reads = time.time() + float(sys.argv[4]), 0
while time.time() < deadline:
    reader.refresh()
    # One generation or another, never a mix: every table counts the same rollouts.
    rollouts, stages, work, steps = reader.con.execute(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM rollout_stages($run)),"
        " (SELECT count(*) FILTER (known) FROM _rollout_work($run)), (SELECT count(*) FROM rollout_steps($run))",
        {"run": sys.argv[2]}).fetchone()
    assert rollouts == stages == work == steps, (rollouts, stages, work, steps)
    analyses.funnel(reader.con, sys.argv[2])
    reads += 1
print(reads)
"""


@pytest.mark.slow
def test_readers_report_and_check_while_writers_publish_and_compaction_runs(tmp_path):
    store = tmp_path / "store"
    write_run(store, RUN, steps=1)
    seconds = 25
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    writers = [python(WRITE, str(store), RUN, str(seed), "12", **pipe) for seed in (1, 2)]
    compactor = python(COMPACT, str(store), str(seconds), **pipe)
    readers = [python(READ, str(store), RUN, how, str(seconds), **pipe) for how in ("wait", "live")]
    cli = [sys.executable, "-m", "rollscope.app.cli"]
    commands = []
    deadline = time.time() + seconds
    while time.time() < deadline:  # a cron check and a report, again and again
        for command in ("report", "check"):
            done = subprocess.run(
                [*cli, command, "--store", str(store), "--run", RUN], capture_output=True, text=True, cwd=ROOT
            )
            commands.append((command, done.returncode, done.stderr))
    outs = {}
    for process in [*writers, compactor, *readers]:
        outs[process.pid], err = process.communicate(timeout=300)
        assert (process.returncode, err) == (0, ""), err
    assert all(int(outs[r.pid]) > 2 for r in readers)
    assert [c for c in commands if c[1] not in (0, 1) or c[2]] == []  # check exits 1 on a failed rule only
    layout.compact(store, grace_seconds=0)
    assert figures(Reader(store, run_id=RUN).con) == figures(Reader(raw_copy(store, tmp_path / "fresh")).con)


@pytest.mark.slow  # derives the sample run twice, once at one step per block (18 s)
def test_a_full_derivation_of_a_long_run_leaves_few_parts_and_the_same_figures(tmp_path):
    """A long run derived from scratch is consolidated before it is published: a table of a
    30M-span run kept ~1,000 files (one per block of steps) that every reader opened. With one step per block
    the sample run has a block per step; its tables keep fewer than FANOUT parts per tier, each merged part in
    its table's row order (so a step range or one grain reads only its row groups), and every figure equals the
    one derived with the default blocks."""
    from rollscope.queries import connect
    from rollscope.queries.parquet_parts import FANOUT

    store = raw_copy(ROOT / "sample_data", tmp_path / "store")
    code = (
        "import json, sys; from rollscope.queries import connect; from tests.test_derived import figures; "
        "print('FIGURES ' + json.dumps(figures(connect(sys.argv[1], run_id='sample'), 'sample')))"
    )
    env = {**os.environ, "ROLLSCOPE_BLOCK_STEPS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(store)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    small_blocks = json.loads(done.stdout.rsplit("FIGURES ", 1)[1])

    state = derived.current(store, "sample")
    steps = max(int(derived.part_range(p)[1]) for p in state.files()["funnel_sums"] if derived.part_range(p))
    assert steps > 2 * FANOUT  # enough blocks that the parts must have been merged
    sorted_rows, in_order = duckdb.connect(), set()
    for table in TABLES:
        parts = [p for p in state.files()[table.name] if derived.part_range(p)]
        newest = max((derived.part_range(p)[1] for p in parts), default=0)
        parts = [p for p in parts if derived.part_range(p)[1] < newest - 1]  # the newest two stay alone
        tiers: dict[int, int] = {}
        for part in parts:
            first, last = derived.part_range(part)
            tier = int(math.log(last - first + 1, FANOUT) + 1e-9)
            tiers[tier] = tiers.get(tier, 0) + 1
        assert all(n < FANOUT for n in tiers.values()), (table.name, tiers)
        merged = [p for p in parts if len(set(derived.part_range(p))) == 2]  # of more than one block
        for part in merged if table.row_order else ():
            read = f"SELECT {', '.join(table.row_order)} FROM read_parquet('{part}')"
            written = sorted_rows.execute(read).fetchall()
            assert written == sorted_rows.execute(f"{read} ORDER BY ALL").fetchall(), (table.name, part)
            in_order.add(table.name)
    assert {"funnel_sums", "prefill_sums", "spec_sums", "compute_busy", "scoring"} <= in_order

    fresh = raw_copy(ROOT / "sample_data", tmp_path / "fresh")
    # doubles nearly: sums over other blocks add in another order (12 digits rounded on both sides tipped a tie)
    assert near(small_blocks) == json.loads(json.dumps(figures(connect(fresh, run_id="sample"), "sample")))


def test_the_shipped_derived_table_schemas_are_what_binding_the_definitions_gives():
    """queries/sql/raw/derived_schemas.json follows the SQL that types the derived tables (``make schemas``
    writes it): a stale file would make every first open bind every definition again."""
    assert derived_schemas.shipped() is not None, "the shipped schemas are for other SQL: run `make schemas`"
    assert derived_schemas.PATH.read_text() == derived_schemas.text(), "run `make schemas`"


@pytest.mark.long  # two full derivations of the sample run
def test_a_full_derivation_from_the_shipped_schemas_equals_one_binding_every_definition(
    tmp_path, monkeypatch
):
    run = "sample"
    shipped = Reader(raw_copy(SAMPLE_STORE, tmp_path / "shipped"), run_id=run)
    monkeypatch.setattr(derived_schemas, "shipped", lambda: None)
    bound = Reader(raw_copy(SAMPLE_STORE, tmp_path / "bound"), run_id=run)
    assert shipped.derivations == bound.derivations == {"derived": 1}
    assert derived_rows(shipped, run) == derived_rows(bound, run)
