"""`rollscope advise`: which lever buys the most usable rollouts per device-second on a run (docs/advisor.md)."""

from __future__ import annotations

import json
import sys

from rollscope import formats as fmt
from rollscope.app.commands._common import add_progress, add_run, add_store, name_value, on_run, step_range
from rollscope.app.pages import TITLES

LEVER_KEYS = (
    "rank", "lever", "title", "action", "applies", "why_not", "metric", "before", "after", "usable", "usable_after",
    "device_seconds", "device_seconds_after", "usable_per_device_s", "usable_per_device_s_after", "gain",
    "evidence", "page",
)  # fmt: skip


def register(sub) -> None:
    p = sub.add_parser(
        "advise",
        help="the levers ranked by the usable rollouts per device-second each would buy on a run",
        description="Rank the levers of docs/advisor.md (task selection, scoring, infrastructure, staleness "
        "bound, drafter refresh, speculative budget, prefix continuity, prompt sharing, compaction, prefill-decode "
        "disaggregation, tool waits) "
        "by their estimated gain in usable rollouts per device-second, each with its evidence and what-if.",
    )
    add_store(p)
    add_progress(p)
    add_run(p, optional=True)
    p.add_argument(
        "--steps", type=step_range, metavar="A:B", help="only rollouts consumed by train steps A..B"
    )
    p.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=name_value(_what_ifs),
        help="change a what-if setting, e.g. target_nonzero_signal=0.9 (repeatable; see docs/advisor.md)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON object (keys in docs/advisor.md)")
    p.set_defaults(func=run)


def _what_ifs():
    from rollscope.queries.analyses import ADVICE_DEFAULTS

    return ADVICE_DEFAULTS


def run(args) -> int:
    advice = on_run(args, lambda con: advise(con, args.run, args.steps, dict(args.what_if)))
    if args.json:
        json.dump(advice, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(advice))
    return 0


def advise(con, run_id: str, steps=None, what_if: dict | None = None) -> dict:
    """The object ``--json`` prints: the run, the selection, the what-if settings, the baseline, the levers.
    Read as plain rows (``analyses.advice``): the command never imports pandas."""
    from rollscope.queries import analyses

    con = analyses.memo(con)
    settings = {**analyses.ADVICE_DEFAULTS, **(what_if or {})}
    answers = analyses.together(
        {
            "levers": lambda: analyses.advice(con, run_id, steps, **(what_if or {})),
            "base": lambda: analyses.advice_base(con, run_id, steps),
        }
    )
    rows, base = answers["levers"], answers["base"]
    levers = _columns([{k: analyses.plain(row.get(k)) for k in LEVER_KEYS} for row in rows])
    return {
        "run_id": run_id,
        "steps": list(steps) if steps else None,
        "what_if": settings,
        "baseline": {
            "usable": base.get("usable"),
            "device_seconds": base.get("device_seconds"),
            "usable_per_device_s": base.get("usable_per_device_s"),
            "rates": {
                k: base.get(f"{k}_rate") for k in ("completion", "scoring", "nonzero_signal", "freshness")
            },
        },
        "levers": levers,
    }


def _columns(levers: list[dict]) -> list[dict]:
    """Each key's numbers of one type across the levers, as a column of a table holds them: floats when any of
    them is a float or missing (a lever's ``before`` k = 4 reads 4.0 beside another's rate 0.69)."""
    for key in LEVER_KEYS:
        values = [lever[key] for lever in levers]
        given = [v for v in values if v is not None]
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in given)
        if given and numbers and (len(given) < len(values) or any(isinstance(v, float) for v in given)):
            for lever in levers:
                lever[key] = None if lever[key] is None else float(lever[key])
    return levers


def render(advice: dict) -> str:
    base = advice["baseline"]
    per_k = None if base["usable_per_device_s"] is None else 1000 * base["usable_per_device_s"]
    steps = "all steps" if not advice["steps"] else f"steps {advice['steps'][0]}–{advice['steps'][1]}"
    lines = [
        f"run {advice['run_id']}  {steps}: {fmt.count(base['usable'])} usable rollouts in "
        f"{fmt.count(base['device_seconds'])} device-seconds ({fmt.number(per_k)} per 1,000 device-seconds)",
        "",
    ]
    if not base["usable"]:
        from rollscope.queries.analyses import ADVICE_NOTHING_USABLE

        return "\n".join([*lines, ADVICE_NOTHING_USABLE]) + "\n"
    lines.append("Levers, by estimated gain in usable rollouts per device-second:")
    applies = [lever for lever in advice["levers"] if lever["applies"]]
    for lever in applies:
        lines += [
            f"{lever['rank']:>2}. {lever['title']:<32} {_gain(lever['gain']):>9}  {lever['action']}",
            f"    {lever['evidence']}",
            f"    what-if: usable {fmt.count(lever['usable'])} → {fmt.count(lever['usable_after'])}, "
            f"device-seconds {fmt.count(lever['device_seconds'])} → {fmt.count(lever['device_seconds_after'])}; "
            f"evidence on the {TITLES[lever['page']]} page",
        ]
    rest = [lever for lever in advice["levers"] if not lever["applies"]]
    if rest:
        lines += ["", "Does not apply:"]
        lines += [f"  - {lever['title']}: {lever['why_not']}" for lever in rest]
    return "\n".join(lines) + "\n"


def _gain(value) -> str:
    return fmt.MISSING if fmt.missing(value) else f"{100 * value:+.1f} %"
