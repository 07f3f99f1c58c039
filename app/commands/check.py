"""`rollscope check`: a run's health rules, one line each, exit status 1 when any fails (for cron and CI)."""

from __future__ import annotations

from rollscope.app.commands._common import add_progress, add_run, add_store, name_value, on_run


def register(sub) -> None:
    p = sub.add_parser(
        "check",
        help="health rules for a run (exit 1 when one fails)",
        description="Check a run: drafter log-probs, acceptance drift, staleness violations, nonzero-signal "
        "collapse, dropped spans, train-inference mismatch, stalls, and the detectors of training going wrong "
        "(entropy collapse, KL acceleration, length drift and limit, reward dominance and divergence, group "
        "collapse, mismatch rising). One PASS/FAIL line per rule; exit status 1 when any fails.",
    )
    add_store(p)
    add_progress(p)
    add_run(p, optional=True)
    add_rule_options(p, now="last-span")
    p.set_defaults(func=run)


def add_rule_options(p, now: str) -> None:
    """--threshold and --now, as `check` and `watch` take them; ``now``: the default of --now (a run's newest
    span for `check`, which also reads finished runs; wall-clock now for `watch`, which watches a live one)."""
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=name_value(_thresholds),
        help="change one rule's threshold, e.g. acceptance-drift=15 (repeatable; see docs/report.md)",
    )
    p.add_argument(
        "--now",
        choices=("last-span", "wall"),
        default=now,
        help=f"what 'now' is for the stall rule (default {now}): the end of the run's newest span (a finished or "
        "simulated run) or wall-clock now (a live job, to catch a whole run gone silent)",
    )


def _thresholds():
    from rollscope.queries.checks import THRESHOLDS

    return THRESHOLDS


def run(args) -> int:
    import time

    from rollscope.queries.checks import run_checks

    now_ns = time.time_ns() if args.now == "wall" else None
    results = on_run(args, lambda con: run_checks(con, args.run, dict(args.threshold), now_ns))
    for result in results:
        print(result.line())
    return 0 if all(r.ok for r in results) else 1
