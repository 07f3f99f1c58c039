"""The store under many writers and readers at once, crashes and compaction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollscope.errors import StoreError
from rollscope.queries import connect
from rollscope.queries.reader import Reader
from rollscope.store import layout
from tests.conftest import python, rollscope

WRITER = """
import pathlib, sys, time
from rollscope.collectors import attach
rl = attach(store=sys.argv[1], run_id="live", segment_seconds=0.05, set_global=False)
total, halfway = int(sys.argv[2]), pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None
for i in range(total):
    if halfway and i == total // 2:  # the second half once the reader has read: the stream overlaps its reads
        deadline = time.time() + 60
        while not halfway.exists() and time.time() < deadline:
            time.sleep(0.05)
    with rl.rollout(f"r{i}", task_id=f"t{i % 7}", environment="swe", policy_version=i // 50):
        pass
    if i % 100 == 99:
        rl.force_flush()
        time.sleep(0.2)  # a stream of several seconds, so the reader reads it while it grows
rl.shutdown()
print("done", flush=True)
"""

READER = """
import pathlib, sys, time
from rollscope.queries.reader import Reader
reader = Reader(sys.argv[1])
counts, errors = [], 0
deadline = time.time() + 60
while time.time() < deadline:
    try:
        reader.refresh()
        counts.append(int(reader.sql("SELECT count(*) AS n FROM rollouts").n[0]))
        pathlib.Path(sys.argv[3]).touch()  # the writer goes on only now
    except Exception as e:
        errors += 1
        print("error:", e, file=sys.stderr)
    if counts and counts[-1] == int(sys.argv[2]):
        break
print(len(counts), errors, min(counts), max(counts), all(a <= b for a, b in zip(counts, counts[1:])))
"""


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_reader_process_queries_while_a_writer_process_streams(store):
    total, halfway = 3000, str(store.parent / "reader-has-read")
    writer = python(WRITER, str(store), str(total), halfway, stdout=subprocess.PIPE)
    reader = python(
        READER, str(store), str(total), halfway, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = reader.communicate(timeout=120)
    writer.wait(timeout=60)
    reads, errors, _, last, monotonic = out.split()
    assert (int(errors), err) == (0, "")
    assert int(reads) > 1
    assert monotonic == "True"
    assert int(last) == total


@pytest.mark.long  # kill -9 of writer processes
def test_kill_9_of_a_writer_leaves_every_published_segment_readable(store):
    writer = python(WRITER, str(store), "1000000", stdout=subprocess.DEVNULL)
    deadline = time.time() + 30
    while len(layout.segments(store)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    published = layout.segments(store)
    assert len(published) >= 3
    expected = sum(pq.read_metadata(p).num_rows for p in published)
    reader = Reader(store)
    assert int(reader.sql("SELECT count(*) AS n FROM spans").n[0]) == expected
    leftovers = [p for p in (store / "spans" / "run_id=live").iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) <= 1  # at most the one segment being written, invisible to readers


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
@pytest.mark.parametrize("materialize", [False, True])
def test_compaction_while_reading_never_shows_duplicates_or_gaps(attached, store, materialize):
    rl = attached(run_id="busy", segment_rows=50)
    for i in range(1000):
        with rl.rollout(f"r{i}", task_id="t"):
            pass
        if i % 50 == 49:
            rl.force_flush()
    rl.force_flush()
    before = len(layout.segments(store))
    reader = Reader(store, materialize=materialize)
    compactor = python(
        "import sys; from rollscope.store.layout import compact; compact(sys.argv[1])", str(store)
    )
    seen = set()
    while compactor.poll() is None:
        reader.refresh()
        seen.add(int(reader.sql("SELECT count(*) AS n FROM rollouts").n[0]))
    assert compactor.returncode == 0
    reader.refresh()
    seen.add(int(reader.sql("SELECT count(DISTINCT rollout_id) AS n FROM rollouts").n[0]))
    assert seen == {1000}
    assert len(layout.segments(store)) < before
    layout.compact(store, grace_seconds=0)  # a later compaction deletes the replaced segments
    assert len(list((store / "spans" / "run_id=busy").glob("seg-*"))) == 0
    reader.refresh()
    assert int(reader.sql("SELECT count(*) AS n FROM rollouts").n[0]) == 1000


@pytest.mark.long  # a compaction process killed
def test_a_compaction_that_died_before_deleting_its_sources_is_finished_later(attached, store):
    rl = attached(run_id="r")
    for batch in range(3):
        with rl.rollout(f"r{batch}"):
            pass
        rl.force_flush()
    sources = layout.segments(store, "spans", "r")
    # Simulate the crash: publish the merged segment but keep the sources.
    import pyarrow as pa

    table = pa.concat_tables([pq.read_table(p) for p in sources])
    meta = {layout.SOURCES_KEY: json.dumps([p.name for p in sources]).encode()}
    (sources[0].parent / "cmp-0000000000000-dead.parquet").write_bytes(b"")
    pq.write_table(table.replace_schema_metadata(meta), sources[0].parent / "cmp-0000000000000-dead.parquet")
    assert int(Reader(store).sql("SELECT count(*) AS n FROM rollouts").n[0]) == 3
    layout.compact(store, grace_seconds=0)
    assert all(not p.exists() for p in sources)
    assert int(Reader(store).sql("SELECT count(*) AS n FROM rollouts").n[0]) == 3


def test_an_empty_store_reads_as_empty_and_a_missing_one_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = rollscope("sql", "--store", empty, "SELECT count(*) AS n FROM rollouts")
    assert code == 0 and out.split() == ["n", "0"]
    code, out, err = rollscope("runs", "--store", tmp_path / "nowhere")
    assert code == 1
    assert (
        err.strip() == f"rollscope: No store: no rollscope store at {tmp_path / 'nowhere'} (nothing has been "
        "written there yet)"
    )
    assert connect(empty).execute("SELECT count(*) FROM rollouts").fetchone() == (0,)
    with pytest.raises(
        StoreError, match="no rollscope store at .*nowhere"
    ):  # from Python: a typo is not empty
        connect(tmp_path / "nowhere")


def test_bad_sql_is_one_clear_line(attached, store):
    rl = attached()
    with rl.rollout("r1"):
        pass
    rl.force_flush()
    code, out, err = rollscope("sql", "--store", store, "SELEC nonsense")
    assert code == 1 and out == ""
    assert err.startswith("rollscope: Query failed: Parser Error") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("", "Empty query"),
        ("   \n\t ", "Empty query"),
        ("-- just a comment", "Empty query"),
        ("/* a block comment */ ;", "Empty query"),
        ("SELECT 1 AS a; SELECT 2 AS b", "One statement at a time"),
        ("SELECT count(*) FROM rollouts;; SELECT 2;", "One statement at a time"),
    ],
)
def test_empty_sql_or_several_statements_is_one_clear_line(attached, store, query, title):
    rl = attached()
    with rl.rollout("r1"):
        pass
    rl.force_flush()
    code, out, err = rollscope("sql", "--store", store, query)
    assert (code, out) == (1, "")
    assert err.startswith(f"rollscope: {title}: ") and err.count("\n") == 1, err


def test_one_statement_with_a_trailing_semicolon_runs(attached, store):
    rl = attached()
    with rl.rollout("r1"):
        pass
    rl.force_flush()
    code, out, err = rollscope(
        "sql", "--store", store, "--format", "csv", "SELECT count(*) AS n FROM rollouts; "
    )
    assert (code, out, err) == (0, "n\n1\n", "")


def test_runs_are_partitioned_and_listed(attached, store):
    for run in ("exp-1", "exp-2"):
        rl = attached(run_id=run)
        for i in range(3 if run == "exp-1" else 5):
            with rl.rollout(f"{run}-{i}"):
                pass
        rl.force_flush()
    code, out, _ = rollscope("runs", "--store", store, "--format", "json")
    runs = {r["run_id"]: r for r in json.loads(out)}
    assert {k: (v["spans"], v["rollouts"]) for k, v in runs.items()} == {"exp-1": (3, 3), "exp-2": (5, 5)}
    assert layout.delete_run(store, "exp-1")
    _, out, _ = rollscope("runs", "--store", store, "--format", "json")
    assert [r["run_id"] for r in json.loads(out)] == ["exp-2"]


@pytest.mark.parametrize("materialize", [False, True], ids=["parquet", "materialized"])
def test_a_reader_for_one_run_reads_only_that_run(attached, store, materialize):
    for run, rollouts in (("exp-1", 3), ("exp-2", 5)):
        rl = attached(run_id=run)
        for i in range(rollouts):
            with rl.rollout(f"{run}-{i}"):
                pass
        rl.force_flush()
    con = connect(store, materialize=materialize, run_id="exp-2")
    assert con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY ALL").fetchall() == [("exp-2", 5)]
    assert connect(store, run_id="../elsewhere").execute("SELECT count(*) FROM spans").fetchone() == (0,)


def test_views_script_works_in_a_plain_duckdb_client(attached, store, tmp_path):
    rl = attached()
    with rl.rollout("r1", environment="math"), rl.turn(0, input_tokens=10, output_tokens=5):
        pass
    rl.force_flush()
    code, script, _ = rollscope("views", "--store", store)
    assert code == 0
    # Each segment is named once, in the view that reads it: never in a comment (a store of 20,000 segments
    # would print them all on one comment line).
    segment = next(Path(store).glob("spans/*/*.parquet")).name
    assert script.count(segment) == 1
    assert not [line for line in script.splitlines() if line.startswith("--") and ".parquet" in line]
    (tmp_path / "views.sql").write_text(script)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(); c.execute(open(sys.argv[1]).read());"
            " print(c.execute('SELECT environment, output_tokens FROM turns').fetchall())",
            tmp_path / "views.sql",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == "[('math', 5)]"


def test_a_file_that_is_not_a_segment_is_named_in_one_line_and_the_store_is_left_as_it_was(attached, store):
    """A foreign writer that died mid-file, or a file copied in by hand: every command names it and says what to
    do, in one line, instead of a traceback, and changes nothing in the store."""
    rl = attached()
    with rl.rollout("r1", environment="math"):
        pass
    rl.force_flush()
    partition = Path(store) / "spans" / "run_id=exp-7"
    stray = partition / "seg-9999999999999-deadbeef00-000001.parquet"
    stray.write_bytes(b"PAR1 and then the writer died")
    files = sorted(partition.glob("*.parquet"))
    for command in (
        ("report", "--store", store, "--run", "exp-7"),
        ("check", "--store", store, "--run", "exp-7"),
        ("runs", "--store", store),
        ("sql", "--store", store, "SELECT count(*) FROM rollouts"),
        ("compact", "--store", store),
    ):
        code, out, err = rollscope(*command)
        assert code == 1, command
        assert err.count("\n") == 1 and err.startswith("rollscope: Unreadable segment:"), (command, err)
        assert str(stray) in err and "Traceback" not in err
    assert sorted(partition.glob("*.parquet")) == files  # nothing merged, moved or deleted
    stray.unlink()
    code, out, err = rollscope(
        "sql", "--store", store, "--format", "json", "SELECT count(*) AS n FROM rollouts"
    )
    assert (code, err, json.loads(out)) == (0, "", [{"n": 1}])


def test_a_file_that_is_not_a_segment_moved_out_while_a_reader_reads_is_no_error(
    attached, store, monkeypatch
):
    """The user moves the file out while a reader is failing on it (a live dashboard ticks every two seconds):
    by the time the reader looks for the file to name it, there is none. It lists the run again and reads it,
    rather than raising pyarrow's error about the file that is gone."""
    rl = attached()
    with rl.rollout("r1", environment="math"):
        pass
    rl.force_flush()
    stray = Path(store) / "spans" / "run_id=exp-7" / "seg-9999999999999-deadbeef00-000001.parquet"
    stray.write_bytes(b"PAR1 and then the writer died")
    looked_for = layout.unreadable_segment

    def moved_out_first(*args):
        stray.unlink(missing_ok=True)  # the user's `mv`, between the failed read and the look for the file
        return looked_for(*args)

    monkeypatch.setattr(layout, "unreadable_segment", moved_out_first)
    reader = Reader(store, run_id="exp-7")

    assert not stray.exists()
    assert reader.con.execute("SELECT count(*) FROM rollouts").fetchone() == (1,)


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_store_of_one_run_needs_no_run_id_to_read_and_always_one_to_delete(attached, store):
    rl = attached()  # run exp-7
    with rl.rollout("r1", environment="math"):
        pass
    rl.force_flush()
    for command in ("report", "advise"):
        same = rollscope(command, "--store", store, "--run", "exp-7")
        assert rollscope(command, "--store", store) == same and same[0] == 0
    checked = rollscope("check", "--store", store)  # its lines hold "silent for N s": the rules and verdicts
    assert checked[0] == 0 and [line.split(":")[0] for line in checked[1].splitlines()] == [
        line.split(":")[0] for line in rollscope("check", "--store", store, "--run", "exp-7")[1].splitlines()
    ]
    assert json.loads(rollscope("report", "--store", store, "--json")[1])["run_id"] == "exp-7"
    other = attached(run_id="exp-8")
    with other.rollout("r2", environment="math"):
        pass
    other.force_flush()
    code, out, err = rollscope("report", "--store", store)
    assert (code, out, err) == (
        1,
        "",
        f"rollscope: Which run: {store} holds 2 runs (exp-7, exp-8): give one with --run ID\n",
    )
    with pytest.raises(SystemExit) as exit_:
        rollscope("rm", "--store", store)
    assert exit_.value.code == 2
    assert sorted(p.name for p in (Path(store) / "spans").iterdir()) == ["run_id=exp-7", "run_id=exp-8"]
