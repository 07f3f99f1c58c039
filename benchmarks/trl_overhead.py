"""Wall time the TRL adapter adds to a real GRPOTrainer run: the tiny CPU run of benchmarks/fixtures/trl_tiny.py (2-layer
Llama, 8 completions a step), plain and with ``instrument()``, same seed, in one process.

The runs come in pairs, plain and instrumented, the order alternating from pair to pair (ABBA: plain first
in even pairs, instrumented first in odd ones), so a drift in the machine's load or a process-wide state that
builds up run after run (heap, caches, CPU frequency) falls on both arms alike. One warm-up run of each arm
comes first: imports and first-call costs land there, and the instrumented warm-up's ``instrument()`` time,
imports included, is printed as what the first call in a process costs. Each run starts from a collected heap
(``gc.collect()`` outside the timed window), and torch's intra-op threads are the same in both arms
(``--threads``; default: torch's own choice, printed).

What is timed: ``instrument()``, ``train()`` and ``close()`` (the final flush to the store) for the
instrumented arm, ``train()`` for the plain one. Where the difference is: each run is cut into three phases
by a timing callback both arms carry (added before ``instrument()``): the start (up to the first step's
``on_step_begin``: ``instrument()`` and TRL's set-up), the steps (to the last step's ``on_step_end``), and the
end (to ``close()`` returning: the flush when training ends); per phase, the median of the pairs' differences
with its interval, and the steps' difference per step, what a longer run pays again. Figures: the median of
the pairs' wall ratios with a bootstrap 95 % confidence interval (pairs resampled, fixed seed), the ratio of
the arms' median walls, the same for the process's CPU time (every thread), and rollscope's own CPU: the
adapter's bookkeeping on the training thread plus its threads (span building and the exporter's, from their
own CPU clocks; the compactor's from Linux /proc). The target (< 2 %) is shown when the interval's upper end
is below it; the spread of the pairs' ratios is printed with the pairs such an interval would take on this
machine at the median found. Needs the trl extra.
Usage: python -m benchmarks.trl_overhead [--steps N] [--repeats PAIRS] [--threads T]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import math
import os
import random
import statistics
import tempfile
import threading
import time
import warnings
from pathlib import Path

from benchmarks.fixtures import trl_tiny

TARGET = 0.02


def background_cpu() -> float:
    """CPU seconds of the threads rollscope runs beside training other than the adapter's span thread and the
    exporter's (which end when their work is done; their CPU is in the adapter's stats, ``emit_cpu_s`` and
    ``export_cpu_s``): the compactor's threads, and an SDK batch processor if any (Linux /proc, by thread id).
    Read from ``schedstat`` (nanoseconds on a CPU) where the kernel keeps it: ``stat``'s clock ticks are 10 ms,
    as much as these threads use in a run, so a median of them read 0 or 10 ms."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for thread in threading.enumerate():
        if not thread.name.startswith(("rollscope", "OtelBatch")) or thread.native_id is None:
            continue
        if thread.name in ("rollscope-trl", "rollscope-export"):
            continue
        task = Path(f"/proc/self/task/{thread.native_id}")
        try:
            total += int((task / "schedstat").read_text().split()[0]) / 1e9
            continue
        except (OSError, ValueError, IndexError):
            pass
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


def _phase_clock():
    """A callback noting when the first step begins and the last one ends (both arms carry it)."""
    from transformers import TrainerCallback

    class PhaseClock(TrainerCallback):
        first_step = last_step_end = None

        def on_step_begin(self, args, state, control, **kwargs):
            if self.first_step is None:
                self.first_step = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.last_step_end = time.perf_counter()

    return PhaseClock()


def run(root: Path, steps: int, traced: bool) -> dict:
    from rollscope.integrations.trl import instrument

    trainer = trl_tiny.trainer(root / "out", max_steps=steps)
    clock = _phase_clock()
    trainer.add_callback(clock)
    gc.collect()  # both arms start from a collected heap: building the trainer left garbage behind
    before = background_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    inst = instrument(trainer, store=root / "store", run_id="bench") if traced else None
    attached = time.perf_counter() - start
    with contextlib.redirect_stdout(io.StringIO()):  # TRL prints each step's log line: not what is measured
        trainer.train()
    if inst is not None:
        inst.close()
    end = time.perf_counter()
    out = {"wall": end - start, "cpu": time.process_time() - cpu}
    out["phases"] = {
        "start": clock.first_step - start,
        "steps": clock.last_step_end - clock.first_step,
        "end": end - clock.last_step_end,
    }
    out["figures"] = trl_tiny.training_figures(trainer.state.log_history)
    if inst is not None:
        out["background"] = background_cpu() - before
        out["stats"] = inst.stats
        out["instrument_s"] = attached
        inst.rl.shutdown()
    return out


def pairs(root: Path, steps: int, repeats: int) -> tuple[list[dict], list[dict]]:
    """``repeats`` plain/instrumented pairs, ABBA order; asserts each pair trained identically."""
    plain, traced = [], []
    for i in range(repeats):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {arm: run(root / f"{'traced' if arm else 'plain'}{i}", steps, arm) for arm in order}
        assert got[False]["figures"] == got[True]["figures"], "the adapter changed training"
        plain.append(got[False])
        traced.append(got[True])
    return plain, traced


def bootstrap_median(values: list[float], resamples: int = 4000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the median of ``values`` (resampled with replacement, fixed seed)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20, help="plain/instrumented pairs, after warm-ups")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads, both arms")
    args = parser.parse_args()
    # transformers' deprecation notices about TRL's own calls (gradient_checkpointing_*): four a run, a
    # thousand lines over the default pairs, burying the figures.
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run(root / "warmup-plain", args.steps, False)
        first = run(root / "warmup-traced", args.steps, True)
        plain, traced = pairs(root, args.steps, args.repeats)
    load = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(load_before, os.getloadavg(), strict=True))
    report(args, plain, traced, first, load, torch.get_num_threads())


def report(args, plain: list[dict], traced: list[dict], first: dict, load: str, threads: int) -> None:
    def median(runs, key):
        return statistics.median(key(r) for r in runs)

    p, t = median(plain, lambda r: r["wall"]), median(traced, lambda r: r["wall"])
    pc, tc = median(plain, lambda r: r["cpu"]), median(traced, lambda r: r["cpu"])
    ratios = [b["wall"] / a["wall"] - 1 for a, b in zip(plain, traced, strict=True)]
    cpu_ratios = [b["cpu"] / a["cpu"] - 1 for a, b in zip(plain, traced, strict=True)]
    paired, (low, high) = statistics.median(ratios), bootstrap_median(ratios)
    cpu_paired, (cpu_low, cpu_high) = statistics.median(cpu_ratios), bootstrap_median(cpu_ratios)
    a = median(traced, lambda r: r["stats"]["adapter_s"])
    ac = median(traced, lambda r: r["stats"]["adapter_cpu_s"])
    bg = median(traced, lambda r: r["background"] + r["stats"]["emit_cpu_s"] + r["stats"]["export_cpu_s"])
    inst = median(traced, lambda r: r["instrument_s"])
    cost = ac + bg
    stats = traced[-1]["stats"]
    print(
        f"tiny GRPO run: {args.steps} steps, 8 completions a step, {args.repeats} pairs (ABBA order), "
        f"torch intra-op threads: {threads}"
    )
    print(f"load average (1, 5, 15 min) before/after: {load} on {os.cpu_count()} CPUs")
    print(f"plain run (baseline):         {p:8.3f} s wall  {pc:8.3f} s CPU   walls: {_list(plain)}")
    print(f"with instrument():            {t:8.3f} s wall  {tc:8.3f} s CPU   walls: {_list(traced)}")
    print(
        f"wall, median of the pairs' ratios: {paired * 100:+.2f} % "
        f"(95 % CI {low * 100:+.2f} .. {high * 100:+.2f} %); ratio of medians {(t / p - 1) * 100:+.2f} %"
    )
    print(
        f"process CPU, median of the pairs' ratios: {cpu_paired * 100:+.2f} % "
        f"(95 % CI {cpu_low * 100:+.2f} .. {cpu_high * 100:+.2f} %); ratio of medians {(tc / pc - 1) * 100:+.2f} %"
    )
    print(
        f"instrument(): {inst * 1000:.1f} ms a run; the first in the process (imports included): "
        f"{first['instrument_s'] * 1000:.1f} ms"
    )
    print(_phases(plain, traced, args.steps))
    print(f"adapter on the training thread: {a:.3f} s wall, {ac:.3f} s CPU")
    print(f"rollscope's own threads (span building, exporter, compactor): {bg:.3f} s CPU")
    print(
        f"rollscope's CPU cost = {cost:.3f} s = {cost / p * 100:.2f} % of the plain run's wall time, "
        f"{cost / pc * 100:.2f} % of its CPU time"
    )
    verdict = "shown" if high < TARGET else "not shown"
    print(f"target < {TARGET * 100:.0f} % wall: {verdict} (the interval's upper end is {high * 100:+.2f} %)")
    print(_pairs_needed(ratios, paired))
    print(f"spans written per run: {sum(stats['spans'].values())}, failures: {stats['failures'] or 'none'}")
    print("training figures identical with and without the adapter: yes (every pair)")


def _phases(plain: list[dict], traced: list[dict], steps: int) -> str:
    """Where the extra wall time is: the pairs' differences per phase (median and 95 % interval, ms)."""
    parts = []
    for phase in ("start", "steps", "end"):
        diffs = [b["phases"][phase] - a["phases"][phase] for a, b in zip(plain, traced, strict=True)]
        low, high = bootstrap_median(diffs)
        base = statistics.median(r["phases"][phase] for r in plain)
        parts.append(
            f"{phase} {statistics.median(diffs) * 1000:+.1f} ms ({low * 1000:+.1f} .. {high * 1000:+.1f}; "
            f"plain {base * 1000:.0f} ms)"
        )
    per_step = statistics.median(
        (b["phases"]["steps"] - a["phases"]["steps"]) / max(1, steps - 1)
        for a, b in zip(plain, traced, strict=True)
    )
    return f"extra wall by phase, pairs' medians: {'; '.join(parts)}; the steps' {per_step * 1000:+.2f} ms a step"


def _pairs_needed(ratios: list[float], median: float) -> str:
    """How far the machine's noise is from letting the interval show the target: the spread of the pairs'
    ratios, and the pairs an interval below TARGET would take if the median stayed where it is (the median's
    standard error is about 1.2533 σ / √n for a normal spread)."""
    spread = statistics.stdev(ratios)
    line = f"spread of the pairs' wall ratios (SD): {spread * 100:.1f} %"
    if median >= TARGET:
        return f"{line}; the median itself is not below the target"
    needed = math.ceil((1.96 * 1.2533 * spread / (TARGET - median)) ** 2)
    return f"{line}: an interval below {TARGET * 100:.0f} % would take about {needed:,} pairs at this median"


def _list(runs) -> str:
    return ", ".join(f"{r['wall']:.2f}" for r in runs)


if __name__ == "__main__":
    main()
