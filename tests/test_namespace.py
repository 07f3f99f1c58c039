"""rollscope installs under one name, so a job's own modules called app, queries or store never collide; and it
installs quietly, with every SQL file, page and preset it reads at run time."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests.conftest import ROOT, sql_json


def setuptools_config() -> dict:
    """pyproject.toml's [tool.setuptools]: what the install maps and lists."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


JOB = """
from rollscope import attach

rl = attach(store={store!r}, run_id="exp-7", role="rollout", devices=1, set_global=False)
with rl.rollout("r1", task_id="t1", environment="swe", policy_version=0) as rollout:
    with rl.turn(0, input_tokens=100, output_tokens=10):
        pass
    rollout.set(reward=1.0, rollout_status="ok")
assert rl.force_flush()
rl.shutdown()
import queries, store, collectors, app  # the job's own modules are still the ones it gets
print(queries.MINE, store.MINE, collectors.MINE, app.MINE)
"""


def test_a_job_with_its_own_app_queries_collectors_and_store_modules_attaches_and_writes(tmp_path):
    job = tmp_path / "job"
    (job / "app").mkdir(parents=True)
    (job / "app" / "__init__.py").write_text("MINE = 'app'\n")
    for name in ("queries", "collectors", "store"):
        (job / f"{name}.py").write_text(f"MINE = {name!r}\n")
    runs = tmp_path / "runs"
    (job / "train.py").write_text(JOB.format(store=str(runs)))

    done = subprocess.run([sys.executable, "train.py"], cwd=job, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["queries", "store", "collectors", "app"]
    assert sql_json(runs, "SELECT rollout_id, reward FROM rollouts") == [{"rollout_id": "r1", "reward": 1.0}]


def test_nothing_but_rollscope_is_installed_at_the_top_level():
    setuptools = setuptools_config()
    packages = setuptools["packages"] + list(setuptools["package-dir"])
    assert {p.split(".")[0] for p in packages} == {"rollscope"}
    # Every folder that holds our code is installed under the namespace.
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "benchmarks"}
    assert {f"rollscope.{f}" for f in folders - {"rollscope"}} <= set(setuptools["package-dir"])


def test_the_adapters_have_one_module_name():
    # The adapters' folder sits inside collectors/; importing it through that path as well would make a second
    # copy of every adapter module, with its own state.
    code = (
        "import rollscope.integrations.trl as trl\n"
        "try:\n"
        "    import rollscope.collectors.integrations.trl\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
        "print(trl.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    refused, name = done.stdout.splitlines()
    assert refused.startswith("refused:") and "rollscope.integrations.trl" in refused
    assert name == "rollscope.integrations.trl"


def test_every_folder_of_installed_files_is_a_package_setuptools_is_told_about():
    """setuptools warns, about 40 lines a folder on every fresh clone's install, of each importable folder
    holding files it installs (SQL, page scripts, presets) that `packages` does not list."""
    setuptools = setuptools_config()
    roots = {ROOT / folder: package for package, folder in setuptools["package-dir"].items()}
    found = set()
    for root, package in roots.items():
        for path in root.rglob("*"):
            parts = path.relative_to(root).parts
            if any(root in other.parents and other in (path, *path.parents) for other in roots):
                continue  # a folder inside mapped to a package of its own (collectors/integrations)
            importable = path.is_dir() and all(p.isidentifier() for p in parts) and "__pycache__" not in parts
            if importable and any(f.is_file() for f in path.iterdir()):
                found.add(".".join((package, *parts)))
    assert len(found) > 10 and found <= set(setuptools["packages"]), sorted(
        found - set(setuptools["packages"])
    )


def test_the_package_builds_without_warnings_and_holds_every_file_it_reads(tmp_path):
    """What a fresh clone's install builds (pip builds with the newest setuptools): no warning printed, and a
    wheel holding every SQL file, page script and preset. Needs a setuptools that builds wheels by itself."""
    pytest.importorskip("setuptools", minversion="70.1")
    source = tmp_path / "source"  # a copy: a build writes build/ and an egg-info beside the sources
    setuptools = setuptools_config()
    for top in {folder.split("/")[0] for folder in setuptools["package-dir"].values()}:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)

    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path]
    done = subprocess.run([*build, source], capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr
    # Python's warnings (setuptools' among them), not pip's notes about this machine's index
    warned = re.findall(r"\w+Warning: .*", done.stdout + done.stderr)
    assert not warned, warned[:3]
    (wheel,) = tmp_path.glob("rollscope-*.whl")
    held = set(zipfile.ZipFile(wheel).namelist())
    read = [
        *ROOT.glob("queries/sql/**/*.sql"),
        *ROOT.glob("app/screens/*.py"),
        *ROOT.glob("simulator/presets/*"),
    ]
    read.append(ROOT / "queries/sql/raw/derived_schemas.json")
    missing = [p for p in read if f"rollscope/{p.relative_to(ROOT).as_posix()}" not in held]
    assert len(read) > 150 and not missing, missing[:5]
