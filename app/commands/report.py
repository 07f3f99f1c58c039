"""`rollscope report`: a run's headline figures, as text for people or a stable JSON object for scripts."""

from __future__ import annotations

import json
import sys

from rollscope import formats as fmt
from rollscope.app.commands._common import add_progress, add_run, add_store, on_run
from rollscope.semconv import COMPUTE_TERMS, FUNNEL_RATES, FUNNEL_STAGES


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="a run's headline figures: funnel, compute, prefill:decode, spec decoding, staleness",
        description="Print a run's headline figures (every key of --json is documented in docs/report.md).",
    )
    add_store(p)
    add_progress(p)
    add_run(p, optional=True)
    p.add_argument("--json", action="store_true", help="print the stable JSON object instead of text")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries.report import report

    figures = on_run(args, lambda con: report(con, args.run))
    if args.json:
        json.dump(figures, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(figures))
    return 0


def render(report: dict) -> str:
    """The report as aligned text, one section per analysis, in the formats of rollscope/formats.py."""
    lines = [
        f"run {report['run_id']}  steps {_steps(report['steps'])}  environments {', '.join(report['environments']) or '-'}"
    ]
    for title, rows in _sections(report):
        lines += ["", title] + [f"  {label:<34} {value}".rstrip() for label, value in rows]
    return "\n".join(lines) + "\n"


def _sections(report: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        ("Usable-experience funnel", _funnel_rows(report["funnel"])),
        ("Compute", _compute_rows(report["compute"])),
        ("Prefill : decode", _prefill_rows(report["prefill_decode"])),
        ("Speculative decoding", _spec_rows(report["spec_decode"])),
        ("Staleness", staleness_rows(report["staleness"])),
        ("Trainer and throughput", _throughput_rows(report["trainer"], report["throughput"])),
        ("Health (as of the run's newest span)", _health_rows(report["health"], report["goodput"])),
        ("Is training going wrong (detectors)", _detector_rows(report["detectors"])),
    ]


def _detector_rows(detectors: dict) -> list[tuple[str, str]]:
    """Each detector: firing now, fired before, never fired, or nothing to judge yet (docs/metrics.md)."""
    rows = []
    for key, d in detectors.items():
        if not d["steps_judged"]:
            verdict = "nothing to judge yet"
        elif d["firing"]:
            verdict = f"FIRING (first fired at step {d['first_step']}, {fmt.count(d['steps_fired'])} steps)"
        elif d["steps_fired"]:
            verdict = f"fired at {fmt.count(d['steps_fired'])} steps, {d['first_step']}–{d['last_step']}"
        else:
            verdict = f"never fired in {fmt.count(d['steps_judged'])} steps"
        rows.append((key.replace("_", "-"), verdict))
    return rows


def _health_rows(health: dict, goodput: dict) -> list[tuple[str, str]]:
    oldest = health["oldest_in_flight_rollout"]
    rows = [
        ("rollouts in flight", fmt.count(health["in_flight"])),
        (
            "oldest in flight",
            f"{fmt.seconds(health['oldest_in_flight_s'])}" + (f" ({oldest})" if oldest else ""),
        ),
        (
            "most silent process",
            f"{health['most_silent_process'] or '-'} for {fmt.seconds(health['most_silent_s'])}",
        ),
    ]
    for kind in ("verifier", "judge"):
        latency = health["scoring"][kind]
        rows.append(
            (
                f"{kind} latency p50 / p99",
                f"{fmt.seconds(latency['p50_s'])} / {fmt.seconds(latency['p99_s'])}, "
                f"{fmt.count(latency['timeouts'])} timeouts",
            )
        )
    return rows + [
        ("trainer computing share", fmt.rate(goodput["trainer_computing_share"])),
        ("trainer waiting on weight sync", fmt.seconds(goodput["trainer_sync_wait_s"])),
        ("rollout devices generating", fmt.rate(goodput["rollout_generating_share"])),
        ("rollout device time never used", fmt.device_seconds(goodput["wasted_device_s"])),
    ]


def _funnel_rows(funnel: dict) -> list[tuple[str, str]]:
    rows = [("dispatched", fmt.count(funnel["dispatched"]))]
    for stage in FUNNEL_STAGES[1:4]:  # completed, scored, nonzero_signal: each with its rate
        rate = FUNNEL_RATES[stage]
        rows.append(
            (
                stage,
                f"{fmt.count(funnel[stage])}  ({fmt.rate(funnel['rates'][rate])} {rate.replace('_', '-')} rate)",
            )
        )
    if funnel["scored"] and not funnel.get("scored_in_groups"):
        rows[-1] = (
            "nonzero_signal",
            f"{fmt.count(funnel['nonzero_signal'])}  (— : no group has 2 scored attempts)",
        )
    rows.append(
        ("fresh", f"{fmt.count(funnel['fresh'])}  ({fmt.rate(funnel['rates']['freshness'])} freshness rate)")
    )
    rows.append(
        ("usable", f"{fmt.count(funnel['usable'])}  ({fmt.rate(funnel['rates']['usable'])} of dispatched)")
    )
    rows += [
        (f"  lost at {loss['stage']}", f"{fmt.count(loss['lost'])} {loss['reason']}")
        for loss in funnel["losses"]
    ]
    return rows


def _compute_rows(compute: dict) -> list[tuple[str, str]]:
    total, seconds = compute["flops"]["total"], compute["device_seconds"]["total"]
    rows = [
        (
            f"C_{term}",
            f"{fmt.flops(compute['flops'][term])}  {fmt.device_seconds(compute['device_seconds'][term], like=seconds)}"
            f"  ({fmt.rate(compute['flops_share'][term])} of C_total FLOPs)",
        )
        for term in COMPUTE_TERMS
    ]
    work = compute["token_work"]
    return rows + [
        ("C_env", f"{fmt.device_seconds(compute['env_cpu_seconds'], 'CPU')}  (CPU time, beside the FLOPs)"),
        ("C_total", f"{fmt.flops(total)}  {fmt.device_seconds(compute['device_seconds']['total'])}"),
        ("per usable token: re-prefilled", _times(work["reprefilled"])),
        ("per usable token: trained", _times(work["trained"])),
        ("per usable token: teacher-scored", _times(work["teacher_scored"])),
        ("wasted compute share", fmt.rate(compute["wasted_compute_share"])),
    ]


def _prefill_rows(prefill: dict) -> list[tuple[str, str]]:
    return [
        ("new prefill : decode", fmt.ratio(prefill["ratio"])),
        ("prefix-cache hit rate", fmt.rate(prefill["cache_hit_rate"])),
        ("re-prefill waste tokens", fmt.count(prefill["reprefill_waste_tokens"])),
        ("disaggregation would pay", "yes" if prefill["disaggregation"]["verdict"] else "no"),
        *[("", reason) for reason in prefill["disaggregation"]["reasons"]],
    ]


def _spec_rows(spec: dict) -> list[tuple[str, str]]:
    return [
        ("acceptance rate", fmt.rate(spec["acceptance_rate"])),
        ("mean accepted length", _tokens(spec["mean_accepted_length"])),
        ("expected tokens per verify step", _tokens(spec["expected_tokens_per_step"])),
        ("largest drift", fmt.points(spec["max_drift_points"])),
        ("turns with drafter log-probs", fmt.count(spec["drafter_logprob_turns"])),
    ]


def staleness_rows(staleness: dict) -> list[tuple[str, str]]:
    """The staleness figures under the names the check and the Staleness page use too."""
    bound = staleness["bound"]
    return [
        ("staleness bound", "none declared" if bound is None else f"{bound} policy versions"),
        ("consumed samples", fmt.count(staleness["samples"])),
        ("mean / max versions behind", f"{fmt.number(staleness['mean'])} / {fmt.count(staleness['max'])}"),
        ("within the bound", f"{fmt.rate(staleness['within_bound_share'])} of consumed samples"),
        (
            "beyond the bound",
            f"{fmt.count(staleness['beyond_bound'])} samples "
            f"({fmt.count(staleness['unused_beyond_bound'])} not used by the trainer)",
        ),
        (
            "used beyond the bound",
            f"{fmt.count(staleness['used_beyond_bound'])} samples (violations; should be 0)",
        ),
    ]


def _throughput_rows(trainer: dict, throughput: dict) -> list[tuple[str, str]]:
    rate = fmt.per_second(throughput["rollout_tokens_per_s"], "tokens")
    if throughput["rollout_tokens_per_s"] is None and throughput.get("rate_window_s") is not None:
        rate = f"— (the turns span {fmt.seconds(throughput['rate_window_s'])}; a rate needs at least 1 s)"
    return [
        ("trainer idle fraction", fmt.rate(trainer["idle_fraction"])),
        ("decoded tokens / s", rate),
        (
            "rollout length p50 / p90 / p99",
            " / ".join(fmt.count(throughput[k]) for k in ("length_p50", "length_p90", "length_p99"))
            + " tokens",
        ),
        (
            "rollout duration p50 / p90 / p99",
            " / ".join(
                fmt.seconds(throughput[k]) for k in ("duration_p50_s", "duration_p90_s", "duration_p99_s")
            ),
        ),
        ("tool / sandbox wait share", fmt.rate(throughput["tool_wait_share"])),
        (
            "dropped / failed spans",
            f"{fmt.count(throughput['dropped_spans'])} / {fmt.count(throughput['failed_spans'])}",
        ),
    ]


def _steps(steps: dict) -> str:
    return "-" if steps["first"] is None else f"{steps['first']}–{steps['last']}"


def _times(value) -> str:
    return fmt.MISSING if fmt.missing(value) else f"{value:,.2f} ×"


def _tokens(value) -> str:
    return fmt.MISSING if fmt.missing(value) else f"{value:,.2f} tokens"
