"""`rollscope simulate`: write a realistic simulated agent-RL run, and its ground truth, into a store."""

from __future__ import annotations

import sys
from pathlib import Path

from rollscope.app.commands._common import add_store, number


def register(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="write a simulated agent-RL run (and its ground truth) into a store",
        description="Simulate an asynchronous agent-RL run: rollout servers, a trainer, judges, sandboxes and "
        "an optional teacher emit spans through attach() from worker processes. The ground truth goes to "
        "STORE/ground_truth/RUN_ID.json (docs/simulator.md).",
    )
    add_store(p)
    p.add_argument("--run-id", required=True, metavar="ID", help="run id to write")
    p.add_argument(
        "--preset",
        default="default",
        metavar="NAME",
        help="default, sample, worked-example, worked-example-080 or scale (default: default)",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="JSON file of knobs overriding the preset (repeatable)",
    )
    p.add_argument("--steps", type=int, default=None, metavar="N", help="train steps (overrides the config)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="seed (overrides the config)")
    p.add_argument("--workers", type=int, default=None, metavar="K", help="worker processes (default: CPUs)")
    p.add_argument(
        "--spans",
        type=number(1, whole=True),
        default=None,
        metavar="TARGET",
        help="scale mode: simulate steps until about TARGET spans are written",
    )
    p.add_argument(
        "--pace",
        type=number(0),
        default=0.0,
        metavar="SECONDS",
        help="spread the run over wall time, at least SECONDS per step (to watch it live)",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help="write the same spans without the SDK and attach(), several times faster (benchmark stores)",
    )
    p.add_argument("--no-samples", action="store_true", help="do not emit rl.sample spans")
    p.add_argument("--replace", action="store_true", help="replace an existing run of this id")
    p.add_argument(
        "--compact",
        action="store_true",
        help="merge the run's segments into as few files as possible when done (to ship a run)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.settings import default_store
    from rollscope.simulator import config, simulate

    overrides = [config.load_file(f) for f in args.config]
    flags = {"steps": args.steps, "seed": args.seed, "emit_samples": False if args.no_samples else None}
    overrides.append({k: v for k, v in flags.items() if v is not None})
    resolved = config.resolve(args.preset, overrides)
    store = Path(args.store or default_store())
    result = simulate(
        store,
        args.run_id,
        resolved,
        preset=args.preset,
        workers=args.workers,
        spans_target=args.spans,
        progress=not args.quiet,
        replace_run=args.replace,
        pace=args.pace,
        fast=args.fast,
    )
    if args.compact:
        _compact(store, args.run_id)
    print(
        f"simulated run {result.run_id}: {result.steps} steps, {result.spans:,} spans in "
        f"{result.seconds:.1f} s ({result.spans_per_second:,.0f} spans/s)"
    )
    print(f"ground truth: {result.ground_truth}", file=sys.stderr)
    return 0


def _compact(store: Path, run_id: str) -> None:
    """Compact, then drop the replaced segments at once (nobody reads a run being shipped)."""
    from rollscope.store.layout import compact

    for _ in range(2):
        compact(store, run_id, grace_seconds=0)
