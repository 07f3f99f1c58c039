"""`rollscope report`: a run's headline figures, as text for people or a stable JSON object for scripts."""

from __future__ import annotations

import json
import sys

from rollscope.app import formats as fmt
from rollscope.app.commands._common import add_store, store_of
from rollscope.queries.funnel_stages import RATES, STAGES


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
    """The report as aligned text, one section per analysis, in the formats of app/formats.py."""
    lines = [
        f"run {r['run_id']}  steps {_steps(r['steps'])}  environments {', '.join(r['environments']) or '-'}"
    ]
    for title, rows in _sections(r):
        lines += ["", title] + [f"  {label:<34} {value}".rstrip() for label, value in rows]
    return "\n".join(lines) + "\n"


def _sections(r: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        ("Usable-experience funnel", _funnel_rows(r["funnel"])),
        ("Compute", _compute_rows(r["compute"])),
        ("Prefill : decode", _prefill_rows(r["prefill_decode"])),
        ("Speculative decoding", _spec_rows(r["spec_decode"])),
        ("Staleness", staleness_rows(r["staleness"])),
        ("Trainer and throughput", _throughput_rows(r["trainer"], r["throughput"])),
    ]


def _funnel_rows(f: dict) -> list[tuple[str, str]]:
    rows = [("dispatched", fmt.count(f["dispatched"]))]
    for stage in STAGES[1:4]:  # completed, scored, nonzero_signal: each with its rate
        rate = RATES[stage]
        rows.append(
            (stage, f"{fmt.count(f[stage])}  ({fmt.rate(f['rates'][rate])} {rate.replace('_', '-')} rate)")
        )
    if f["scored"] and not f.get("scored_in_groups"):
        rows[-1] = (
            "nonzero_signal",
            f"{fmt.count(f['nonzero_signal'])}  (— : no group has 2 scored attempts)",
        )
    rows.append(("fresh", f"{fmt.count(f['fresh'])}  ({fmt.rate(f['rates']['freshness'])} freshness rate)"))
    rows.append(("usable", f"{fmt.count(f['usable'])}  ({fmt.rate(f['rates']['usable'])} of dispatched)"))
    rows += [(f"  lost at {x['stage']}", f"{fmt.count(x['lost'])} {x['reason']}") for x in f["losses"]]
    return rows


def _compute_rows(c: dict) -> list[tuple[str, str]]:
    total, seconds = c["flops"]["total"], c["device_seconds"]["total"]
    rows = [
        (
            f"C_{term}",
            f"{fmt.flops(c['flops'][term])}  {fmt.device_seconds(c['device_seconds'][term], like=seconds)}"
            f"  ({fmt.rate(c['flops_share'][term])} of C_total FLOPs)",
        )
        for term in ("rollout", "train", "teacher", "judge")
    ]
    w = c["token_work"]
    return rows + [
        ("C_env", f"{fmt.device_seconds(c['env_cpu_seconds'], 'CPU')}  (CPU time, beside the FLOPs)"),
        ("C_total", f"{fmt.flops(total)}  {fmt.device_seconds(c['device_seconds']['total'])}"),
        ("per usable token: re-prefilled", _times(w["reprefilled"])),
        ("per usable token: trained", _times(w["trained"])),
        ("per usable token: teacher-scored", _times(w["teacher_scored"])),
        ("wasted compute share", fmt.rate(c["wasted_compute_share"])),
    ]


def _prefill_rows(p: dict) -> list[tuple[str, str]]:
    return [
        ("new prefill : decode", fmt.ratio(p["ratio"])),
        ("prefix-cache hit rate", fmt.rate(p["cache_hit_rate"])),
        ("re-prefill waste tokens", fmt.count(p["reprefill_waste_tokens"])),
        ("disaggregation would pay", "yes" if p["disaggregation"]["verdict"] else "no"),
        *[("", reason) for reason in p["disaggregation"]["reasons"]],
    ]


def _spec_rows(s: dict) -> list[tuple[str, str]]:
    return [
        ("acceptance rate", fmt.rate(s["acceptance_rate"])),
        ("mean accepted length", _tokens(s["mean_accepted_length"])),
        ("expected tokens per verify step", _tokens(s["expected_tokens_per_step"])),
        ("largest drift", fmt.points(s["max_drift_points"])),
        ("turns with drafter log-probs", fmt.count(s["drafter_logprob_turns"])),
    ]


def staleness_rows(st: dict) -> list[tuple[str, str]]:
    """The staleness figures under the names the check and the Staleness page use too."""
    bound = st["bound"]
    return [
        ("staleness bound", "none declared" if bound is None else f"{bound} policy versions"),
        ("consumed samples", fmt.count(st["samples"])),
        ("mean / max versions behind", f"{fmt.number(st['mean'])} / {fmt.count(st['max'])}"),
        ("within the bound", f"{fmt.rate(st['within_bound_share'])} of consumed samples"),
        (
            "beyond the bound",
            f"{fmt.count(st['beyond_bound'])} samples "
            f"({fmt.count(st['beyond_bound'] - st['used_beyond_bound'])} not used by the trainer)",
        ),
        ("used beyond the bound", f"{fmt.count(st['used_beyond_bound'])} samples (violations; should be 0)"),
    ]


def _throughput_rows(t: dict, th: dict) -> list[tuple[str, str]]:
    rate = fmt.per_second(th["rollout_tokens_per_s"], "tokens")
    if th["rollout_tokens_per_s"] is None and th.get("rate_window_s") is not None:
        rate = f"— (the turns span {fmt.seconds(th['rate_window_s'])}; a rate needs at least 1 s)"
    return [
        ("trainer idle fraction", fmt.rate(t["idle_fraction"])),
        ("decoded tokens / s", rate),
        (
            "rollout length p50 / p90 / p99",
            " / ".join(fmt.count(th[k]) for k in ("length_p50", "length_p90", "length_p99")) + " tokens",
        ),
        (
            "rollout duration p50 / p90 / p99",
            " / ".join(fmt.seconds(th[k]) for k in ("duration_p50_s", "duration_p90_s", "duration_p99_s")),
        ),
        ("tool / sandbox wait share", fmt.rate(th["tool_wait_share"])),
        ("dropped / failed spans", f"{fmt.count(th['dropped_spans'])} / {fmt.count(th['failed_spans'])}"),
    ]


def _steps(steps: dict) -> str:
    return "-" if steps["first"] is None else f"{steps['first']}–{steps['last']}"


def _times(x) -> str:
    return fmt.MISSING if fmt.missing(x) else f"{x:,.2f} ×"


def _tokens(x) -> str:
    return fmt.MISSING if fmt.missing(x) else f"{x:,.2f} tokens"
