"""``simulate()``: plan a run step by step, stream its spans through worker processes, write the ground truth.

The parent plans (one step at a time, so memory stays flat at any size), accumulates the ground truth from
the plan and sends each simulated process its records; the workers emit them through ``attach()``. The plan
depends only on the config and seed, never on which worker runs what or how fast.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from rollscope.errors import RollscopeError
from rollscope.simulator import groundtruth
from rollscope.simulator.config import SimConfig
from rollscope.simulator.planner import Planner
from rollscope.simulator.progress import Progress
from rollscope.simulator.records import Instance, SpanBuilder, instances
from rollscope.store import layout as store_layout

DIGEST_MAX_SPANS = 2_000_000  # beyond this the content digest costs more than it is worth
SCALE_SEGMENT_SECONDS = 30.0


class SimulationError(RollscopeError):
    """The simulation could not run or lost spans on the way to the store."""


@dataclass
class Result:
    run_id: str
    spans: int
    steps: int
    seconds: float
    ground_truth: Path
    digest: str | None

    @property
    def spans_per_second(self) -> float:
        return self.spans / self.seconds if self.seconds else 0.0


def simulate(
    store: Path | str,
    run_id: str,
    config: SimConfig,
    *,
    preset: str = "default",
    workers: int | None = None,
    spans_target: int | None = None,
    progress: bool = False,
    replace_run: bool = False,
    digest: bool | None = None,
    pace: float = 0.0,
    fast: bool = False,
) -> Result:
    """Write one simulated run into ``store`` and its ground truth next to it.

    ``pace`` spreads the run over wall time (at least that many seconds per step) so a dashboard can watch
    it grow; it changes nothing in the spans. ``fast`` writes the same rows without the SDK and attach()
    (``simulator.direct_writer``): for building large benchmark stores, not for testing the collectors path.
    """
    store = Path(store)
    _prepare(store, run_id, replace_run)
    if spans_target is not None:
        config = _steps_for(config, run_id, spans_target)
    procs = instances(config)
    planner, builder = Planner(config), SpanBuilder(config, run_id)
    truth = groundtruth.Truth(config, run_id, preset, procs, builder)
    first = planner.plan_step(0)
    first_spans = builder.step(first)
    assignment = _assign(procs, first_spans.counts(), workers, run_id)
    total = spans_target or len(first_spans) * config.steps
    pool = _pool(
        store, run_id, assignment, config, scale=spans_target is not None, fast=fast, paced=bool(pace)
    )
    try:
        pool.wait_ready()  # spawned workers import and attach first; rates and pacing start after that
        started = time.monotonic()
        bar = Progress(total, f"simulate {run_id}", enabled=progress)
        written = _drive(pool, planner, truth, builder, (first, first_spans), config, spans_target, bar, pace)
        stats = pool.finish(tick=lambda: bar.update(pool.emitted))
    except BaseException:
        pool.terminate()
        raise
    seconds = time.monotonic() - started
    bar.close(pool.emitted)
    _check_delivery(stats, written)
    want_digest = digest if digest is not None else spans_target is None and written <= DIGEST_MAX_SPANS
    content = groundtruth.content_digest(store, run_id) if want_digest else None
    said = want_digest and config.transcripts.enabled
    messages = groundtruth.content_digest(store, run_id, dataset="messages") if said else None
    truth.silent_window = planner.silent_window()
    path = groundtruth.write(store, run_id, truth.document(_events(planner, truth), content, messages))
    return Result(run_id, written, len(truth.steps), seconds, path, content)


def _prepare(store: Path, run_id: str, replace_run: bool) -> None:
    try:
        store_layout.check_run_id(run_id)
    except ValueError as e:
        raise SimulationError("Bad run id", str(e)) from e
    if store.exists() and not store.is_dir():
        raise SimulationError("Not a store", f"{store} is a file, not a rollscope store directory")
    exists = run_id in store_layout.run_ids(store) or groundtruth.path(store, run_id).exists()
    if exists and not replace_run:
        raise SimulationError(
            "Run exists", f"run {run_id!r} is already in {store}; pass --replace to overwrite it"
        )
    if exists:
        store_layout.delete_run(store, run_id)
        groundtruth.path(store, run_id).unlink(missing_ok=True)
    store.mkdir(parents=True, exist_ok=True)


def _steps_for(config: SimConfig, run_id: str, target: int) -> SimConfig:
    """Scale mode: size the run so that about `target` spans are written (events keep their positions)."""
    first = SpanBuilder(config, run_id).step(Planner(config).plan_step(0))
    per_step = max(1, len(first))
    return replace(config, steps=max(1, math.ceil(target / per_step)))


def _assign(procs: list[Instance], counts: Counter, workers: int | None, run_id: str) -> list[list[dict]]:
    """Processes onto K workers, heaviest first onto the least loaded (load = spans in the first step)."""
    k = max(1, min(workers or os.cpu_count() or 2, len(procs)))
    loads = [0] * k
    out: list[list[dict]] = [[] for _ in range(k)]
    for p in sorted(procs, key=lambda p: -counts[p.key]):
        i = loads.index(min(loads))
        loads[i] += counts[p.key] + 1
        out[i].append(
            {
                "key": p.key,
                "service_name": p.service_name,
                "role": p.role,
                "devices": p.devices,
                "model_name": p.model_name,
                "model_parameters": p.model_parameters,
                "instance_id": groundtruth.instance_id(p, run_id),
            }
        )
    return [procs for procs in out if procs]


def _pool(
    store: Path,
    run_id: str,
    assignment: list[list[dict]],
    config: SimConfig,
    scale: bool,
    fast: bool,
    paced: bool = False,
):
    """Scale mode publishes fewer, larger segments (a benchmark store is read, not watched live); a paced
    run flushes each step's spans at once, so a reader never sees one process a step ahead of another for
    long (the stall rule compares processes' last spans)."""
    settings = {"algorithm": config.algorithm, "staleness_bound": config.staleness_bound}
    if fast:
        from rollscope.simulator.direct_writer import FastPool

        return FastPool(str(store), run_id, assignment, settings)
    settings["capture"] = config.transcripts.enabled
    from rollscope.simulator.emit import Pool

    settings["segment_seconds"] = SCALE_SEGMENT_SECONDS if scale else None
    settings["flush_each_batch"] = paced
    return Pool(str(store), run_id, assignment, settings)


def _drive(
    pool,
    planner: Planner,
    truth,
    builder: SpanBuilder,
    first,
    config: SimConfig,
    spans_target: int | None,
    bar: Progress,
    pace: float,
) -> int:
    written, started = 0, time.monotonic()
    tick = lambda: bar.update(pool.emitted)  # noqa: E731
    step, spans = first
    while True:
        truth.add_step(step, spans)
        pool.send(spans, tick)
        written += len(spans)
        if spans_target is None:  # the first step alone misjudges a run whose steps grow or shrink
            bar.estimate(round(written / (step.index + 1) * config.steps))
        tick()
        done = written >= spans_target if spans_target is not None else step.index + 1 >= config.steps
        if done:
            return written
        while pace and time.monotonic() < started + (step.index + 1) * pace:
            time.sleep(min(0.2, pace))
            tick()
        step = planner.plan_step(step.index + 1)
        spans = builder.step(step)


def _check_delivery(stats: dict[str, dict], written: int) -> None:
    exported = sum(s.get("spans_exported", 0) for s in stats.values())
    lost = {k: s for k, s in stats.items() if s.get("spans_dropped") or s.get("spans_failed")}
    if lost or exported != written:
        raise SimulationError(
            "Spans lost",
            f"{written} spans planned, {exported} exported; dropped or failed per process: {lost}",
        )


def _events(planner: Planner, truth) -> dict:
    def inclusive(span):
        return [span[0], span[1] - 1] if span else None

    steps = [p.step for p, _ in truth.steps]
    return {
        "drafter_refreshes": [
            {"drafter_version": name, "drafter_policy_version": v} for v, name in planner.drafters
        ],
        "logprob_drafter_policy_versions": inclusive(planner.logprob_versions),
        "staleness_excursion_steps": inclusive(planner.excursion_steps),
        "mismatch_excursion_steps": inclusive(planner.mismatch_steps),
        "first_step": steps[0],
        "last_step": steps[-1],
    }
