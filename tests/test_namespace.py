"""rollscope installs under one name, so a job's own modules called app, queries or store never collide."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.conftest import ROOT, sql_json

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
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
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
