"""`rollscope derive` here: runs brought up to date as a reader would, and bad arguments said in one line.
Derivation on a Ray cluster is tests/test_ray.py's (slow: a real two-node cluster)."""

from __future__ import annotations

import shutil
import sys
import time

import pytest

from benchmarks.fixtures.derived_rows import derived as derived_tables
from rollscope.queries import Reader
from rollscope.store import derived, layout
from tests.conftest import rollscope
from tests.simulated_runs import raw_store

RUNS = ("samples", "clean")


@pytest.fixture
def two_runs(tmp_path):
    return raw_store(tmp_path / "store", RUNS)


def test_derive_all_brings_every_run_up_to_date_as_a_reader_would(two_runs, tmp_path):
    code, out, err = rollscope("derive", "--store", two_runs, "--all")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == ["run clean", "run samples"]
    assert all(": derived (full) in " in line for line in lines[:-1])
    assert lines[-1].startswith("2 run(s) in ") and lines[-1].endswith(": 2 derived")
    assert all(derived.current(two_runs, run) is not None for run in RUNS)
    reader = Reader(two_runs)
    assert reader.derivations == {"current": 2}  # the next open derives nothing
    fresh = tmp_path / "fresh"
    for dataset in ("spans", "collector_stats", "messages"):  # the raw segments, nothing derived
        shutil.copytree(two_runs / dataset, fresh / dataset)
    for run in RUNS:
        assert derived_tables(reader, run) == derived_tables(Reader(fresh, run_id=run), run)
    code, out, _ = rollscope("derive", "--store", two_runs, "--run", "samples")
    assert code == 0 and out.splitlines()[0] == "run samples: up to date"


def test_derive_takes_several_runs_and_the_stores_one_run_by_default(two_runs):
    code, out, _ = rollscope("derive", "--store", two_runs, "--run", "samples", "clean", "--run", "samples")
    assert code == 0 and [line.split(":")[0] for line in out.splitlines()[:-1]] == [
        "run samples",
        "run clean",
    ]
    layout.delete_run(two_runs, "clean")
    code, out, _ = rollscope("derive", "--store", two_runs)
    assert code == 0 and out.startswith("run samples: up to date\n")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--run", "nope"], "rollscope: Unknown run: no run 'nope' in "),
        (["--run", "../x"], "rollscope: Bad run id: invalid run id '../x'"),
        ([], "give one with --run ID, or --all"),
    ],
)
def test_derive_says_what_is_wrong_with_its_runs_in_one_line_and_derives_nothing(two_runs, args, says):
    code, out, err = rollscope("derive", "--store", two_runs, *args)
    assert code == 1 and out == "" and err.count("\n") == 1 and says in err, err
    assert not (two_runs / "derived").exists()


def test_derive_without_the_ray_extra_says_how_to_install_it(two_runs, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` finds where the extra is not installed
    code, out, err = rollscope("derive", "--store", two_runs, "--all", "--ray", "127.0.0.1:6380")
    assert (code, out) == (1, "")
    assert err == "rollscope: Ray not installed: --ray needs the ray extra: pip install 'rollscope[ray]'\n"


@pytest.mark.extras
def test_derive_on_a_ray_address_where_nothing_answers_says_so_at_once(two_runs):
    pytest.importorskip("ray")
    started = time.monotonic()
    code, out, err = rollscope("derive", "--store", two_runs, "--all", "--ray", "127.0.0.1:1")
    assert (code, out) == (1, "") and time.monotonic() - started < 10
    assert (
        err.startswith("rollscope: Cannot reach Ray: nothing answers at 127.0.0.1:1 (")
        and err.count("\n") == 1
    )
    assert not (two_runs / "derived").exists()
