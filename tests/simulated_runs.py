"""Simulated runs shared by test modules, each simulated once per test session, the first time one asks: under
pytest-xdist once for all the session's workers (conftest gives them one folder, ``SHARED``), not once per worker.
A test reads these stores and copies what it changes; a reader's catch-up writes their derived files, which
the store's own lock keeps right between processes (store.derived)."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from rollscope.simulator import config, groundtruth, simulate

# A small run with every feature: three environments, a teacher, a drafter refresh, the drafter-log-prob
# misconfiguration for policy versions 8-9, a staleness excursion and a train-inference mismatch excursion.
SMALL = {
    "seed": 5,
    "steps": 12,
    "groups_per_step": 6,
    "group_size": 4,
    "rollout": {"count": 2},
    "sandbox": {"count": 2},
    "teacher": {"count": 1},
    "drafter_refreshes": [0.5],
    "logprob_drafter": [0.7, 0.8],
    "staleness_excursion": [0.3, 0.5],
    "mismatch_kl": 0.002,
    "mismatch_excursion": [0.5, 0.7],
}
RUNS = {
    "samples": ("default", SMALL),
    "derived": ("default", {**SMALL, "emit_samples": False}),
    "clean": (
        "default",
        {**SMALL, "logprob_drafter": None, "staleness_excursion": None, "mismatch_excursion": None},
    ),
    # 20 steps: the preset's mismatch excursion widened to three steps, so it covers steps that train on samples
    "sample-preset": (
        "sample",
        {"steps": 20, "groups_per_step": 4, "group_size": 4, "mismatch_excursion": [0.75, 0.9]},
    ),
    "worked-example": ("worked-example", {}),
    "worked-example-080": ("worked-example-080", {}),
    "stall": ("stall", {"groups_per_step": 6, "group_size": 4}),
}


SHARED = "ROLLSCOPE_TESTS_SIMULATED"  # the folder of the session's simulated runs, set for xdist's workers


@cache
def _root() -> Path:
    if os.environ.get(SHARED):
        return Path(os.environ[SHARED])
    root = Path(tempfile.mkdtemp(prefix="rollscope-simulated-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _once(store: Path, write) -> None:
    """``write()`` the store unless a process of the session already has; one writes, the others wait for it.
    A store left by a writer that died is written afresh."""
    with open(store.with_name(store.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = store.with_name(store.name + ".done")
        if not done.exists():
            shutil.rmtree(store, ignore_errors=True)
            write()
            done.touch()


@cache
def simulated(name: str) -> tuple[Path, dict]:
    """(store, ground truth) of one of RUNS, simulated the first time a test asks for it."""
    preset, knobs = RUNS[name]
    store = _root() / name
    _once(store, lambda: simulate(store, name, config.resolve(preset, [knobs]), preset=preset, workers=2))
    return store, groundtruth.load(store, name)


def raw_store(store: Path, runs) -> Path:
    """A store at ``store`` holding the raw segments (spans, collector stats and messages) of simulated ``runs``, nothing
    derived: what `rollscope derive` and a first open start from."""
    from rollscope.store.layout import partition_dir

    for run in runs:
        source, _ = simulated(run)
        for dataset in ("spans", "collector_stats", "messages"):
            if partition_dir(source, dataset, run).is_dir():
                shutil.copytree(partition_dir(source, dataset, run), partition_dir(store, dataset, run))
    return store


@cache
def simulated_preset(preset: str, seed: int | None = None) -> tuple[Path, dict]:
    """(store, ground truth) of a preset as it ships (``seed``: another seed), written in fast mode (the same rows
    from the same plan, without the SDK: docs/simulator.md): the training-health presets are 72 steps each."""
    run = preset if seed is None else f"{preset}-{seed}"
    store = _root() / f"preset-{run}"
    knobs = [] if seed is None else [{"seed": seed}]
    _once(
        store,
        lambda: simulate(store, run, config.resolve(preset, knobs), preset=preset, workers=1, fast=True),
    )
    return store, groundtruth.load(store, run)
