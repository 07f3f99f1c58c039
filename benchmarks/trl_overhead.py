"""Wall time the TRL adapter adds to a real GRPOTrainer run: the tiny CPU run of tests/trl_tiny.py (2-layer
Llama, 8 completions a step), plain and with ``instrument()``, same seed, alternating in one process.

The baseline is the plain run measured in the same process. Figures: the ratio of median wall times
(instrument() and the final flush to the store included); the same for the process's CPU time (every thread:
the adapter's span thread and the store exporter included), which a shared, loaded machine blurs less; and the
seconds the adapter itself took on the training thread (bookkeeping) and on its own thread (building spans).
Needs the trl extra.
Usage: python -m benchmarks.trl_overhead [--steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests import trl_tiny


def background_cpu() -> float:
    """CPU seconds of the threads rollscope runs beside training: the adapter's span thread, the store
    exporter's flush and commit threads, and the SDK batch processor feeding them (Linux /proc, by thread id)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for thread in threading.enumerate():
        if not thread.name.startswith(("rollscope", "OtelBatch")) or thread.native_id is None:
            continue
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


def run(root: Path, steps: int, traced: bool) -> dict:
    from rollscope.integrations.trl import instrument

    trainer = trl_tiny.trainer(root / "out", max_steps=steps)
    before = background_cpu()
    start, cpu = time.perf_counter(), time.process_time()
    inst = instrument(trainer, store=root / "store", run_id="bench") if traced else None
    trainer.train()
    if inst is not None:
        inst.close()
    out = {"wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}
    out["figures"] = trl_tiny.training_figures(trainer.state.log_history)
    if inst is not None:
        out["background"] = background_cpu() - before
        out["stats"] = inst.stats
        inst.rl.shutdown()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="plain/instrumented pairs, after one warm-up")
    args = parser.parse_args()
    plain, traced = [], []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "warmup", args.steps, False)  # first-call costs (imports, kernels) land here
        for i in range(args.repeats):
            plain.append(run(Path(tmp) / f"plain{i}", args.steps, False))
            traced.append(run(Path(tmp) / f"traced{i}", args.steps, True))
            assert plain[-1]["figures"] == traced[-1]["figures"], "the adapter changed training"

    def median(runs, key):
        return statistics.median(key(r) for r in runs)

    p, t = median(plain, lambda r: r["wall"]), median(traced, lambda r: r["wall"])
    pc, tc = median(plain, lambda r: r["cpu"]), median(traced, lambda r: r["cpu"])
    a = median(traced, lambda r: r["stats"]["adapter_s"])
    ac = median(traced, lambda r: r["stats"]["adapter_cpu_s"])
    bg = median(traced, lambda r: r["background"])
    cost = ac + bg
    stats = traced[-1]["stats"]
    load = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(load_before, os.getloadavg(), strict=True))
    print(f"tiny GRPO run: {args.steps} steps, 8 completions a step, repeats: {args.repeats} (medians)")
    print(f"load average (1, 5, 15 min) before/after: {load} on {os.cpu_count()} CPUs")
    print(f"plain run (baseline):         {p:8.3f} s wall  {pc:8.3f} s CPU   walls: {_list(plain)}")
    print(f"with instrument():            {t:8.3f} s wall  {tc:8.3f} s CPU   walls: {_list(traced)}")
    pairs = statistics.median(b["wall"] / a["wall"] - 1 for a, b in zip(plain, traced, strict=True))
    print(
        f"end to end, with / plain:     wall {(t / p - 1) * 100:+.2f} %, process CPU {(tc / pc - 1) * 100:+.2f} %"
        f" (median of the pairs' wall ratios: {pairs * 100:+.2f} %)"
    )
    print(f"adapter on the training thread: {a:.3f} s wall, {ac:.3f} s CPU")
    print(f"rollscope's own threads (span building, exporter, SDK batching): {bg:.3f} s CPU")
    print(
        f"rollscope's CPU cost = {cost:.3f} s = {cost / p * 100:.2f} % of the plain run's wall time, "
        f"{cost / pc * 100:.2f} % of its CPU time (target < 2 %)"
    )
    print(f"spans written per run: {sum(stats['spans'].values())}, failures: {stats['failures'] or 'none'}")
    print("training figures identical with and without the adapter: yes")


def _list(runs) -> str:
    return ", ".join(f"{r['wall']:.2f}" for r in runs)


if __name__ == "__main__":
    main()
