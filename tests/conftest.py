"""Shared fixtures: real stores in tmp_path, real TracerProviders, the real CLI."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Writers compact their runs in the background; tests that count files would race with it, so it is off
# unless a test turns it on (tests/test_compaction.py does, by argument or environment).
os.environ.setdefault("ROLLSCOPE_COMPACT", "0")


def pytest_configure(config):
    """Under xdist, one folder for the session's simulated runs (tests/simulated_runs.py), made by the controller
    before it starts the workers, which inherit its environment: each run is simulated once, not once a worker."""
    from tests.simulated_runs import SHARED

    if not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0):
        config.rollscope_simulated = tempfile.mkdtemp(prefix="rollscope-simulated-")
        os.environ[SHARED] = config.rollscope_simulated


def pytest_unconfigure(config):
    from tests.simulated_runs import SHARED

    folder = getattr(config, "rollscope_simulated", None)
    if folder is not None:
        os.environ.pop(SHARED, None)
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    """A TCP port free on the loopback interface now (for a server or a rendezvous a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def attached(store):
    """attach() factory: private providers (tests attach many times), shut down at teardown."""
    from rollscope.collectors import attach

    made = []

    def make(run_id="exp-7", **kwargs):
        kwargs.setdefault("store", store)
        rl = attach(run_id=run_id, set_global=False, **kwargs)
        made.append(rl)
        return rl

    yield make
    for rl in made:
        rl.shutdown()


def rollscope(*args: str) -> tuple[int, str, str]:
    """Run the `rollscope` command line in-process, as a user would type it."""
    from rollscope.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def sql_json(store, query: str) -> list[dict]:
    """`rollscope sql --format json`, parsed: what a script reading the store would get."""
    code, out, err = rollscope("sql", "--store", store, "--format", "json", query)
    assert (code, err) == (0, ""), err
    return json.loads(out)


def spans_on_disk(store) -> int:
    """Spans in the store's live segments, every run, counted from the files' footers: what a process leaves
    on disk, without opening a reader (which would derive the run first)."""
    import pyarrow.parquet as pq

    from rollscope.store.layout import segments

    return sum(pq.read_metadata(f).num_rows for f in segments(store, "spans"))


def python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """A separate Python process (a writer or reader of the store), as in a real multi-process job."""
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, **kwargs)


# docs/integrations.md's "What each records" table, kept true: a row is what its test's store holds.
RECORDED = {
    "rollouts": "SELECT count(*) > 0 FROM rollouts",
    "turns": "SELECT count(*) > 0 FROM turns",
    "tools": "SELECT count(*) > 0 FROM tools",
    "rewards": "SELECT count(reward) > 0 FROM rewards",
    "sample decisions": "SELECT count(sample_decision) > 0 FROM samples",
    "staleness": "SELECT count(sample_staleness) > 0 FROM samples",
    "spec decoding": "SELECT count(spec_draft_tokens) > 0 FROM turns",
    "transcripts": "SELECT count(*) > 0 FROM messages",
    "weight syncs": "SELECT count(*) > 0 FROM weight_syncs",
}


def recorded(store) -> dict[str, str]:
    """What a store holds, per column of the table: "yes" or "no"."""
    from rollscope.queries import connect

    con = connect(store)
    return {what: "yes" if con.execute(sql).fetchone()[0] else "no" for what, sql in RECORDED.items()}


def documented(framework: str) -> dict[str, str]:
    """The table's row for ``framework``, per column."""
    text = (ROOT / "docs" / "integrations.md").read_text()
    table = text.split("<!-- recorded-table", 1)[1].split("<!-- /recorded-table -->", 1)[0]
    rows = [
        [c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("|")
    ]
    header = rows[0]
    row = next(r for r in rows[2:] if r[0] == framework)
    return dict(zip(header[2:], row[2:], strict=True))
