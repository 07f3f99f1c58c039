"""Runs derived on a Ray cluster: a store of ``--runs`` runs brought up to date with 1 and 2 workers.

The store holds ``--runs`` copies of the shipped sample run (hard links, each under its own run id: the same
derivation each), nothing derived. It is derived three times from scratch, each by `rollscope derive --all`
in a fresh process, timed end to end (connecting to the cluster included, starting it not):

* **here** (the baseline): in this machine's process, one run after another, ``--cpus`` DuckDB threads;
* **Ray, 1 worker**: one node of ``--cpus`` CPUs on a local Ray cluster, a task per run (``--cpus`` each);
* **Ray, 2 workers**: two such nodes.

The nodes run on this machine, so two workers have its cores between them: on a machine with fewer than
``2 x --cpus`` free cores the two-worker figure shows Ray's overhead and what is left of the machine, not a
second machine's worth. Every run's derived tables are checked equal to the baseline's.

Usage: python -m benchmarks.derive_ray [--runs 8] [--cpus 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.fixtures.derived_rows import derived
from benchmarks.fixtures.ray_cluster import environment, local_cluster
from rollscope.queries import Reader
from rollscope.store import layout

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def store_of_runs(root: Path, runs: int) -> Path:
    """``runs`` copies of the sample run's raw segments, hard-linked, as runs ``run-0`` ... ``run-N``."""
    store = root / "store"
    for i in range(runs):
        for dataset in ("spans", "collector_stats"):
            source = layout.partition_dir(SAMPLE, dataset, "sample")
            if source.is_dir():
                shutil.copytree(
                    source, layout.partition_dir(store, dataset, f"run-{i}"), copy_function=os.link
                )
    return store


def timed_derive(store: Path, env: dict[str, str], *ray: str) -> tuple[float, str]:
    """`rollscope derive --all` from scratch (``derived/`` removed first): wall seconds and its summary."""
    shutil.rmtree(store / "derived", ignore_errors=True)
    exe = Path(sys.executable).with_name("rollscope")
    started = time.perf_counter()
    done = subprocess.run(
        [exe, "derive", "--store", str(store), "--all", *ray], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return seconds, done.stdout.splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument(
        "--cpus", type=int, default=1, help="CPUs of a worker (a node), DuckDB threads of a run"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rollscope-derive-ray-") as tmp:
        store = store_of_runs(Path(tmp), args.runs)
        env = {**environment(), "ROLLSCOPE_DERIVE_THREADS": str(args.cpus)}
        here, summary = timed_derive(store, env)
        expected = {run: derived(Reader(store, run_id=run), run) for run in layout.run_ids(store)}
        results = {"here (baseline)": (here, summary)}
        for workers in (1, 2):
            with local_cluster(nodes=workers, cpus=args.cpus, env=env) as address:
                seconds, summary = timed_derive(store, env, "--ray", address, "--cpus", str(args.cpus))
            assert {run: derived(Reader(store, run_id=run), run) for run in expected} == expected
            results[f"Ray, {workers} worker{'s' * (workers > 1)}"] = (seconds, summary)
    print(
        f"# {args.runs} runs of the sample run ({_sample_spans():,} spans each), derived from scratch by"
        f" `rollscope derive --all`; a worker: {args.cpus} CPU(s); os.cpu_count() = {os.cpu_count()},"
        f" load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'where':<18} {'seconds':>8} {'runs/min':>9} {'speed vs 1 worker':>18}   summary")
    one = results["Ray, 1 worker"][0]
    for label, (seconds, summary) in results.items():
        print(
            f"{label:<18} {seconds:>8.1f} {args.runs / seconds * 60:>9.1f} {one / seconds:>17.2f}x   {summary}"
        )
    return 0


def _sample_spans() -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in layout.segments(SAMPLE, "spans", "sample"))


if __name__ == "__main__":
    raise SystemExit(main())
