"""`rollscope report`: a run's headline figures, as text for people or a stable JSON object for scripts."""

from __future__ import annotations

import json
import sys

from rollscope.app.commands._common import add_store, store_of


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="a run's headline figures: funnel, compute, prefill:decode, spec decoding, staleness",
        description="Print a run's headline figures (every key of --json is documented in docs/report.md).",
    )
    add_store(p)
    p.add_argument("--run", required=True, metavar="ID", help="run id (`rollscope runs` lists them)")
    p.add_argument("--json", action="store_true", help="print the stable JSON object instead of text")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries import connect
    from rollscope.queries.report import report

    figures = report(connect(store_of(args), run_id=args.run), args.run)
    if args.json:
        json.dump(figures, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(figures))
    return 0


def render(r: dict) -> str:
    """The report as aligned text, one section per analysis."""
    lines = [
        f"run {r['run_id']}  steps {_steps(r['steps'])}  environments {', '.join(r['environments']) or '-'}"
    ]
    for title, rows in _sections(r):
        lines += ["", title] + [f"  {label:<34} {value}" for label, value in rows]
    return "\n".join(lines) + "\n"


def _sections(r: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    f, c, p, s, st = r["funnel"], r["compute"], r["prefill_decode"], r["spec_decode"], r["staleness"]
    t, th = r["trainer"], r["throughput"]
    return [
        ("Usable-experience funnel", _funnel_rows(f)),
        ("Compute", _compute_rows(c)),
        (
            "Prefill : decode",
            [
                ("new prefill : decode", _ratio(p["ratio"])),
                ("prefix-cache hit rate", _pct(p["cache_hit_rate"])),
                ("re-prefill waste tokens", _int(p["reprefill_waste_tokens"])),
                ("disaggregation would pay", "yes" if p["disaggregation"]["verdict"] else "no"),
                *[("", reason) for reason in p["disaggregation"]["reasons"]],
            ],
        ),
        (
            "Speculative decoding",
            [
                ("acceptance rate", _pct(s["acceptance_rate"])),
                ("mean accepted length", _num(s["mean_accepted_length"])),
                ("expected tokens per verify step", _num(s["expected_tokens_per_step"])),
                ("largest drift (points)", _num(s["max_drift_points"])),
                ("turns with drafter log-probs", _int(s["drafter_logprob_turns"])),
            ],
        ),
        (
            "Staleness",
            [
                ("mean (policy versions behind)", _num(st["mean"])),
                ("max", _int(st["max"])),
                ("within bound", f"{_pct(st['freshness_rate'])} (bound {st['bound']})"),
                ("violations (used beyond bound)", _int(st["violations"])),
            ],
        ),
        (
            "Trainer and throughput",
            [
                ("trainer idle fraction", _pct(t["idle_fraction"])),
                ("decoded tokens / s", _num(th["rollout_tokens_per_s"])),
                (
                    "rollout length p50 / p90 / p99",
                    " / ".join(_int(th[k]) for k in ("length_p50", "length_p90", "length_p99")),
                ),
                ("tool / sandbox wait share", _pct(th["tool_wait_share"])),
                ("dropped / failed spans", f"{_int(th['dropped_spans'])} / {_int(th['failed_spans'])}"),
            ],
        ),
    ]


def _funnel_rows(f: dict) -> list[tuple[str, str]]:
    rows = [("dispatched", _int(f["dispatched"]))]
    for stage, rate in (
        ("completed", "completion"),
        ("scored", "scoring"),
        ("nonzero_signal", "nonzero_signal"),
        ("fresh", "freshness"),
    ):
        rows.append((stage, f"{_int(f[stage])}  ({_pct(f['rates'][rate])})"))
    rows.append(("usable", f"{_int(f['usable'])}  ({_pct(f['rates']['usable'])} of dispatched)"))
    rows += [(f"  lost at {x['stage']}", f"{_int(x['lost'])} {x['reason']}") for x in f["losses"]]
    return rows


def _compute_rows(c: dict) -> list[tuple[str, str]]:
    rows = [
        (f"{term} FLOPs / device-s", f"{_sci(c['flops'][term])} / {_num(c['device_seconds'][term])}")
        for term in ("rollout", "train", "teacher", "judge")
    ]
    w = c["token_work"]
    return rows + [
        ("env CPU-s", _num(c["env_cpu_seconds"])),
        ("per usable token: re-prefilled", _num(w["reprefilled"])),
        ("per usable token: trained", _num(w["trained"])),
        ("per usable token: teacher-scored", _num(w["teacher_scored"])),
        ("wasted compute share", _pct(c["wasted_compute_share"])),
    ]


def _steps(steps: dict) -> str:
    return "-" if steps["first"] is None else f"{steps['first']}–{steps['last']}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _num(x) -> str:
    return "n/a" if x is None else f"{x:,.2f}"


def _int(x) -> str:
    return "n/a" if x is None else f"{int(x):,}"


def _sci(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _ratio(x) -> str:
    return "n/a" if x is None else f"{x:.2f} : 1"
