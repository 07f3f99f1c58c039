"""Health rules for a run, cheap enough to run from cron or CI while the run goes on (`rollscope check`).

Each rule reads one analysis and compares one figure with a threshold; thresholds are documented in
docs/report.md and can be changed per call (``--threshold NAME=VALUE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rollscope.app import formats  # one number format: the check lines read as the report and pages
from rollscope.queries import analyses

THRESHOLDS = {
    "drafter-logprobs": 0,  # most turns allowed to record the drafter's log-probabilities
    "acceptance-drift": 10.0,  # most percentage points a drafter's acceptance may drop from its first versions
    "staleness-violations": 0.25,  # largest share of samples beyond rl.staleness.bound in any window of steps
    "staleness-window": 5,  # consecutive consumed steps per window
    "nonzero-signal": 0.2,  # least nonzero-signal rate over the latest consumed steps
    "nonzero-signal-window": 5,  # how many latest consumed steps that rate covers
    "dropped-spans": 0,  # most spans the exporters may have dropped or failed to write
    "mismatch-kl": 0.01,  # largest mean train-inference KL (rl.sample.mismatch_kl) of any consumed step
}


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    value: float | int | None
    threshold: float | int
    message: str
    unit: str = "count"  # how value and threshold read: "count", "share" (a fraction, shown as %), "points",
    # "nats" (a KL divergence per token)

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.message}"


def run_checks(con, run_id: str, thresholds: dict | None = None) -> list[CheckResult]:
    """Every rule, in a fixed order; ``thresholds`` overrides some of THRESHOLDS."""
    unknown = set(thresholds or {}) - set(THRESHOLDS)
    if unknown:
        raise ValueError(f"unknown threshold {', '.join(sorted(unknown))}; known: {', '.join(THRESHOLDS)}")
    limits = {**THRESHOLDS, **(thresholds or {})}
    con = analyses.shared(con)  # rules reading one analysis (or a shared report's) run it once
    analyses.require_run(con, run_id)
    return [rule(con, run_id, limits) for rule in RULES]


def drafter_logprobs(con, run_id: str, limits: dict) -> CheckResult:
    lint = analyses.logprob_lint(con, run_id)
    turns, limit = int(lint["turns"].sum()), limits["drafter-logprobs"]
    if not turns:
        return CheckResult(
            "drafter-logprobs", True, 0, limit, "no turn recorded the drafter's log-probabilities"
        )
    where = f"steps {_span(lint['step'])}, policy versions {_span(lint['policy_version'])}"
    message = f"{turns:,} turns recorded the drafter's log-probabilities ({where}; at most {limit:g} allowed)"
    return CheckResult("drafter-logprobs", turns <= limit, turns, limit, message)


def acceptance_drift(con, run_id: str, limits: dict) -> CheckResult:
    limit = limits["acceptance-drift"]
    drift = analyses.spec_drift(con, run_id, drop_points=limit)
    if drift["drop_points"].isna().all():
        return CheckResult(
            "acceptance-drift", True, None, limit, "no speculative decoding recorded", "points"
        )
    worst = drift.loc[drift["drop_points"].idxmax()]
    message = (
        f"drafter {worst['drafter_version']} acceptance {formats.rate(worst['baseline_acceptance'])} → "
        f"{formats.rate(worst['latest_acceptance'])} from its first to its latest policy versions, "
        f"a drop of {worst['drop_points']:.1f} points (at most {limit:g} allowed)"
    )
    flagged, drop = bool(drift["flagged"].any()), float(worst["drop_points"])
    return CheckResult("acceptance-drift", not flagged, drop, limit, message, "points")


def staleness_violations(con, run_id: str, limits: dict) -> CheckResult:
    """Some samples beyond the bound are normal in async RL; a window where many are is an excursion."""
    limit, window = limits["staleness-violations"], int(limits["staleness-window"])
    by_step = analyses.staleness_by_step(con, run_id)
    if by_step.empty:
        return CheckResult("staleness-violations", True, None, limit, "no consumed samples yet", "share")
    rolled = by_step[["samples", "beyond_bound"]].rolling(window, min_periods=1).sum()
    share = rolled["beyond_bound"] / rolled["samples"]
    worst, used = share.idxmax(), int(by_step["used_beyond_bound"].sum())
    last_step = int(by_step.at[worst, "step"])
    first_step = int(by_step["step"].iloc[max(0, worst - window + 1)])
    message = (
        f"steps {first_step}–{last_step}: {formats.rate(share[worst])} of consumed samples beyond the bound "
        f"({by_step['staleness_bound'].iloc[0]} policy versions; at most {formats.rate(limit)} in any {window} steps); "
        f"{used} samples used beyond the bound (none allowed)"
    )
    ok = share[worst] <= limit and used == 0
    return CheckResult("staleness-violations", bool(ok), float(share[worst]), limit, message, "share")


def nonzero_signal(con, run_id: str, limits: dict) -> CheckResult:
    limit, window = limits["nonzero-signal"], int(limits["nonzero-signal-window"])
    by_step = analyses.funnel(con, run_id, by="step")
    latest = by_step[by_step["step"].notna()].tail(window)
    frame, where = (latest, f"the last {len(latest)} steps") if len(latest) else (by_step, "all rollouts")
    scored = int(frame["scored"].sum())
    if not scored:
        return CheckResult("nonzero-signal", True, None, limit, "no scored rollouts yet", "share")
    rate = frame["nonzero_signal"].sum() / scored
    if not int(frame["scored_in_groups"].sum()):
        message = "no group has two scored attempts yet: nonzero signal needs groups to compare rewards in"
        return CheckResult("nonzero-signal", True, None, limit, message, "share")
    message = (
        f"nonzero-signal rate {formats.rate(rate)} over {where} (at least {formats.rate(limit)} required)"
    )
    return CheckResult("nonzero-signal", rate >= limit, float(rate), limit, message, "share")


def dropped_spans(con, run_id: str, limits: dict) -> CheckResult:
    row = analyses.lost_spans(con, run_id)
    dropped, failed, limit = (
        row.get("dropped_spans") or 0,
        row.get("failed_spans") or 0,
        limits["dropped-spans"],
    )
    message = f"{dropped:,} spans dropped and {failed:,} failed by the exporters (at most {limit:g} allowed)"
    return CheckResult("dropped-spans", dropped + failed <= limit, dropped + failed, limit, message)


def mismatch_kl(con, run_id: str, limits: dict) -> CheckResult:
    """The trainer's log-probabilities and the inference engine's should agree; a step where they drift apart
    (a kernel, precision or weight-sync bug) trains on the wrong ratios."""
    limit = limits["mismatch-kl"]
    by_step = analyses.mismatch(con, run_id, "step")
    by_step = by_step[by_step["mismatch_kl_mean"].notna()]
    if by_step.empty:
        return CheckResult("mismatch-kl", True, None, limit, "no sample recorded rl.sample.mismatch_kl")
    over = by_step[by_step["mismatch_kl_mean"] > limit]
    worst = by_step.loc[by_step["mismatch_kl_mean"].idxmax()]
    value = float(worst["mismatch_kl_mean"])
    where = f"steps {_span(over['step'])}" if len(over) else f"step {int(worst['step'])}"
    message = (
        f"mean train-inference KL per token up to {value:.4g} ({where}; at most {limit:g} allowed per step), "
        f"{len(over)} of {len(by_step)} steps over it"
    )
    return CheckResult("mismatch-kl", over.empty, value, limit, message, "nats")


RULES = (drafter_logprobs, acceptance_drift, staleness_violations, nonzero_signal, dropped_spans, mismatch_kl)


def _span(values) -> str:
    values = values.dropna()
    if values.empty:
        return "unknown"
    lo, hi = int(values.min()), int(values.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"
