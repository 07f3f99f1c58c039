"""The dashboard tests' stores (pytest fixtures), written by benchmarks/fixtures/seeded_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fixtures.seeded_runs import write_run


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """Two runs: exp-7 (speculative decoding on) and exp-8 (off), to compare."""
    store = tmp_path_factory.mktemp("dashboard") / "store"
    write_run(store, "exp-7", seed=7, steps=5)
    write_run(store, "exp-8", seed=8, steps=3, spec=False)
    return store


@pytest.fixture
def empty_store(tmp_path) -> Path:
    store = tmp_path / "empty-store"
    store.mkdir()
    return store
