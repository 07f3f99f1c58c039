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
import statistics
import tempfile
import time
from pathlib import Path

from tests import trl_tiny


def run(root: Path, steps: int, traced: bool) -> tuple[float, float, dict | None, list]:
    from rollscope.integrations.trl import instrument

    trainer = trl_tiny.trainer(root / "out", max_steps=steps)
    start, cpu = time.perf_counter(), time.process_time()
    inst = instrument(trainer, store=root / "store", run_id="bench") if traced else None
    trainer.train()
    if inst is not None:
        inst.close()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = inst.stats if inst is not None else None
    if inst is not None:
        inst.rl.shutdown()
    return elapsed, cpu, stats, trl_tiny.training_figures(trainer.state.log_history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="plain/instrumented pairs, after one warm-up")
    args = parser.parse_args()
    plain, traced, plain_cpu, traced_cpu, adapter, emit = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "warmup", args.steps, False)  # first-call costs (imports, kernels) land here
        for i in range(args.repeats):
            p, pc, _, p_figures = run(Path(tmp) / f"plain{i}", args.steps, False)
            t, tc, stats, t_figures = run(Path(tmp) / f"traced{i}", args.steps, True)
            assert p_figures == t_figures, "the adapter changed training"
            plain.append(p)
            traced.append(t)
            plain_cpu.append(pc)
            traced_cpu.append(tc)
            adapter.append(stats["adapter_s"])
            emit.append(stats["emit_s"])
    p, t, pc, tc, a, e = (statistics.median(x) for x in (plain, traced, plain_cpu, traced_cpu, adapter, emit))
    print(
        f"tiny GRPO run: {args.steps} steps, 8 completions a step, repeats: {args.repeats} (medians, seconds)"
    )
    print(f"plain run (baseline):           {p:8.3f} s   runs: {', '.join(f'{x:.2f}' for x in plain)}")
    print(f"with instrument():              {t:8.3f} s   runs: {', '.join(f'{x:.2f}' for x in traced)}")
    print(f"wall-time overhead:             {(t / p - 1) * 100:+8.2f} %  (target < 2 %)")
    print(f"process CPU time, plain / with: {pc:8.3f} / {tc:.3f} s  ({(tc / pc - 1) * 100:+.2f} %)")
    print(f"adapter on the training thread: {a:8.3f} s  = {a / p * 100:.2f} % of the plain run's wall time")
    print(f"adapter's span thread:          {e:8.3f} s  = {e / p * 100:.2f} % (concurrent with training)")
    print(f"spans written per run: {sum(stats['spans'].values())}, failures: {stats['failures'] or 'none'}")
    print("training figures identical with and without the adapter: yes")


if __name__ == "__main__":
    main()
