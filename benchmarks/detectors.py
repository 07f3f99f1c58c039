"""The training-health detectors' false-positive rate on healthy runs, and how soon each fires on its failure.

Healthy: the `healthy` preset (72 steps × 64 rollouts, three environments, two reward components) under N
seeds; a false positive is any detector firing at any step. Failures: each failure preset, whose ground truth
names its onset step and the rules that should fire there; the delay is the first step a rule fired at less the
onset (the tests hold it within the rule's window), and any other rule firing is a false positive too. Cost:
the eight detectors' verdicts on a fresh connection, against the seven older check rules on another (what a
`rollscope check` pays for them), per run. Runs are written in fast mode (the same rows as the normal mode).
Usage: python -m benchmarks.detectors [--seeds N] [--root /tmp/detectors-bench] [--presets NAME ...]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from rollscope.queries import analyses, checks
from rollscope.queries.reader import Reader
from rollscope.simulator import config, groundtruth, simulate

FAILURES = (
    "entropy-collapse",
    "kl-acceleration",
    "length-drift",
    "length-explosion",
    "reward-dominance",
    "reward-hacking",
    "group-collapse",
    "mismatch-rising",
)


def run(root: Path, preset: str, seed: int | None) -> tuple[dict, dict, tuple[float, float]]:
    """Simulate one run; its ground truth, each detector's verdict, and (detectors', other rules') seconds."""
    run_id = preset if seed is None else f"{preset}-{seed}"
    store = root / run_id
    shutil.rmtree(store, ignore_errors=True)
    knobs = [] if seed is None else [{"seed": seed}]
    simulate(store, run_id, config.resolve(preset, knobs), preset=preset, workers=1, fast=True)
    reader = Reader(store, run_id=run_id)
    started = time.perf_counter()
    verdicts = {
        rule: analyses.detector_summary(reader.cursor(), run_id, rule, **checks.detector_parameters(rule))
        for rule in analyses.DETECTORS
    }
    detectors_s = time.perf_counter() - started
    older = [rule for rule in checks.RULES if rule not in checks.DETECTOR_RULES]
    con, limits = analyses.memo(reader.cursor()), {**checks.THRESHOLDS, "now_ns": None}
    started = time.perf_counter()
    for rule in older:
        rule(con, run_id, limits)
    others_s = time.perf_counter() - started
    truth = groundtruth.load(store, run_id)
    shutil.rmtree(store, ignore_errors=True)
    return truth, verdicts, (detectors_s, others_s)


def fired(verdicts: dict) -> dict:
    return {rule: v["first_step"] for rule, v in verdicts.items() if v["steps_fired"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="healthy runs, one per seed 1..N (default 20)")
    parser.add_argument("--root", type=Path, default=Path("/tmp/detectors-bench"))
    parser.add_argument("--presets", nargs="*", default=list(FAILURES), help="failure presets to run")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    costs = []
    print(f"healthy preset, seeds 1..{args.seeds}:")
    false_runs, by_rule = 0, dict.fromkeys(analyses.DETECTORS, 0)
    for seed in range(1, args.seeds + 1):
        _, verdicts, cost = run(args.root, "healthy", seed)
        costs.append(cost)
        wrong = fired(verdicts)
        false_runs += bool(wrong)
        for rule in wrong:
            by_rule[rule] += 1
        print(f"  seed {seed:>3}: {wrong or 'none fired'}", flush=True)
    print(f"false positives: {false_runs} of {args.seeds} healthy runs had any detector fire")
    print("  per rule: " + ", ".join(f"{rule} {n}/{args.seeds}" for rule, n in by_rule.items()))
    print("failure presets (onset: the ground truth's; delay: first fired − onset; window: the rule's):")
    for preset in args.presets:
        truth, verdicts, cost = run(args.root, preset, None)
        costs.append(cost)
        (failure,) = truth["failures"]
        got = fired(verdicts)
        for rule in failure["rules"]:
            first, window = got.get(rule), checks.detector_parameters(rule)["window"]
            delay = (
                "never fired" if first is None else f"fired at {first}, delay {first - failure['onset_step']}"
            )
            print(f"  {preset:<18} {rule:<18} onset {failure['onset_step']}: {delay} (window {window})")
        extra = {rule: step for rule, step in got.items() if rule not in failure["rules"]}
        print(f"  {preset:<18} other rules fired: {extra or 'none'}", flush=True)
    detectors_s = statistics.median(c[0] for c in costs)
    others_s = statistics.median(c[1] for c in costs)
    print(
        f"cost per run (median of {len(costs)}): the 8 detectors {detectors_s:.3f} s, the 7 older check rules "
        f"{others_s:.3f} s ({detectors_s / others_s:.2f}×)"
    )


if __name__ == "__main__":
    main()
