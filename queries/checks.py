"""Health rules for a run, cheap enough to run from cron or CI while the run goes on (`rollscope check`).

Each rule reads one analysis and compares one figure with a threshold; thresholds are documented in
docs/report.md and can be changed per call (``--threshold NAME=VALUE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rollscope import formats  # one number format: the check lines read as the report and pages
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
    "stall-rollout-age": 900.0,  # oldest age (seconds) a rollout in flight may reach
    "stall-silence": 600.0,  # longest (seconds) a process may go without writing a span
    # is training going wrong: the detectors (docs/metrics.md, "Detectors"), each over windows of train steps
    "entropy-collapse": 0.3,  # most the entropy's mean over a window may fall to, as a share of its highest so far
    "entropy-window": 5,
    "kl-acceleration": 2.0,  # KL growth over a window, as a multiple of the window before's, that fires ...
    "kl-growth": 0.25,  # ... when it is also at least this share of the previous window's KL
    "kl-window": 10,
    "length-drift": 0.5,  # relative change of mean decoded tokens per rollout from one window to the next
    "length-limit": 0.1,  # share of a window's rollouts a token limit may cut off
    "length-window": 10,
    "reward-dominance": 0.8,  # share of the reward's magnitude a minor component (≤ 1 − it at first) may reach
    "reward-divergence": 0.1,  # rise of the reward and fall of a second signal, window on window, that fires
    "reward-window": 10,
    "group-collapse": 0.5,  # share of the nonzero-signal rate lost from one window to the next
    "group-window": 10,
    "mismatch-rising": 2.0,  # ratio of the train-inference KL's median from one window to the next
    "mismatch-window": 20,
}
# Each detector's threshold is THRESHOLDS[rule]; its window, and any further parameter, are named here.
DETECTOR_SETTINGS = {
    "entropy-collapse": ("entropy-window", {}),
    "kl-acceleration": ("kl-window", {"growth": "kl-growth"}),
    "length-drift": ("length-window", {}),
    "length-limit": ("length-window", {}),
    "reward-dominance": ("reward-window", {}),
    "reward-divergence": ("reward-window", {}),
    "group-collapse": ("group-window", {}),
    "mismatch-rising": ("mismatch-window", {}),
}


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    value: float | int | None
    threshold: float | int
    message: str
    unit: str = "count"  # how value and threshold read: "count", "share" (a fraction, shown as %), "points",
    # "nats" (a KL divergence per token), "seconds", "times" (a ratio, 2.5×), "score" (a reward difference)
    step: int | None = None  # the latest train step the verdict judged (a detector's), for an alert to name

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.message}"


def run_checks(
    con, run_id: str, thresholds: dict | None = None, now_ns: int | None = None
) -> list[CheckResult]:
    """Every rule, in a fixed order; ``thresholds`` overrides some of THRESHOLDS. ``now_ns`` is "now" for
    the stall rule (wall-clock now for a live run); None: the end of the run's newest span."""
    unknown = set(thresholds or {}) - set(THRESHOLDS)
    if unknown:
        raise ValueError(f"unknown threshold {', '.join(sorted(unknown))}; known: {', '.join(THRESHOLDS)}")
    limits = {**THRESHOLDS, **(thresholds or {}), "now_ns": now_ns}
    con = analyses.memo(con)  # rules reading one analysis (or a shared report's) run it once
    analyses.require_run(con, run_id)
    answers = analyses.together(
        {rule.__name__: (lambda rule=rule: rule(con, run_id, limits)) for rule in RULES}
    )
    return list(answers.values())


def drafter_logprobs(con, run_id: str, limits: dict) -> CheckResult:
    lint = analyses.logprob_lint_summary(con, run_id)
    turns, limit = lint["turns"], limits["drafter-logprobs"]
    if not turns:
        return CheckResult(
            "drafter-logprobs", True, 0, limit, "no turn recorded the drafter's log-probabilities"
        )
    steps = _range(lint["first_step"], lint["last_step"])
    where = (
        f"steps {steps}, policy versions {_range(lint['first_policy_version'], lint['last_policy_version'])}"
    )
    message = f"{turns:,} turns recorded the drafter's log-probabilities ({where}; at most {limit:g} allowed)"
    return CheckResult("drafter-logprobs", turns <= limit, turns, limit, message)


def acceptance_drift(con, run_id: str, limits: dict) -> CheckResult:
    limit = limits["acceptance-drift"]
    drift = analyses.spec_drift(con, run_id, drop_points=limit)
    if not drift["worst"].any():
        return CheckResult(
            "acceptance-drift", True, None, limit, "no speculative decoding recorded", "points"
        )
    worst = drift[drift["worst"]].iloc[0]
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
    worst = analyses.staleness_windows(con, run_id, window)
    if not worst:
        return CheckResult("staleness-violations", True, None, limit, "no consumed samples yet", "share")
    if worst["staleness_bound"] is None:  # nothing is beyond a bound the run never declared
        message = "the run declares no staleness bound (attach(staleness_bound=...))"
        return CheckResult("staleness-violations", True, None, limit, message, "share")
    share, used = worst["beyond_bound_share"], worst["used_beyond_bound"]
    message = (
        f"steps {worst['first_step']}–{worst['last_step']}: {formats.rate(share)} of consumed samples beyond the "
        f"bound ({worst['staleness_bound']} policy versions; at most {formats.rate(limit)} in any {window} steps); "
        f"{used} samples used beyond the bound (none allowed)"
    )
    ok = share <= limit and used == 0
    return CheckResult("staleness-violations", bool(ok), float(share), limit, message, "share")


def nonzero_signal(con, run_id: str, limits: dict) -> CheckResult:
    limit, window = limits["nonzero-signal"], int(limits["nonzero-signal-window"])
    recent = analyses.nonzero_signal_recent(con, run_id, window)
    where = f"the last {recent['steps']} steps" if recent["steps"] else "all rollouts"
    if not recent["scored"]:
        return CheckResult("nonzero-signal", True, None, limit, "no scored rollouts yet", "share")
    rate = recent["nonzero_signal_rate"]
    if not recent["scored_in_groups"]:
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
    steps = analyses.mismatch_steps(con, run_id, limit=limit)
    if not steps["steps"]:
        return CheckResult("mismatch-kl", True, None, limit, "no sample recorded rl.sample.mismatch_kl")
    value, over = steps["worst_step_mismatch_kl"], steps["steps_over"]
    where = (
        f"steps {_range(steps['first_step_over'], steps['last_step_over'])}"
        if over
        else f"step {steps['worst_step']}"
    )
    message = (
        f"mean train-inference KL per token up to {value:.4g} ({where}; at most {limit:g} allowed per step), "
        f"{over} of {steps['steps']} steps over it"
    )
    return CheckResult("mismatch-kl", not over, value, limit, message, "nats")


def stall(con, run_id: str, limits: dict) -> CheckResult:
    """Slow or stuck: the oldest rollout in flight, and the process silent longest, as of "now"."""
    age_limit, silence_limit = limits["stall-rollout-age"], limits["stall-silence"]
    flying = analyses.in_flight_summary(con, run_id, now_ns=limits.get("now_ns"))
    quiet = analyses.liveness(con, run_id, now_ns=limits.get("now_ns"))
    age = flying["oldest_age_s"] if flying["in_flight"] else 0.0
    silent = float(quiet["silent_s"].iloc[0]) if len(quiet) else 0.0
    parts = []
    if flying["in_flight"]:
        parts.append(
            f"{flying['in_flight']} rollouts in flight, the oldest {flying['oldest_rollout_id']} "
            f"({flying['oldest_environment']}, on {flying['oldest_instance_id']}) for {age:,.0f} s "
            f"(at most {age_limit:g} s allowed)"
        )
    else:
        parts.append("no rollout in flight")
    if len(quiet):
        parts.append(
            f"{quiet['instance_id'].iloc[0]} silent for {silent:,.0f} s (at most {silence_limit:g} s allowed)"
        )
    ok = age <= age_limit and silent <= silence_limit
    value, limit = (age, age_limit) if age / age_limit >= silent / silence_limit else (silent, silence_limit)
    return CheckResult("stall", ok, value, limit, "; ".join(parts), "seconds")


# --- is training going wrong: the detectors ---------------------------------------------------------------


def detector_parameters(rule: str, thresholds: dict | None = None) -> dict:
    """The keyword arguments of ``analyses.detector*`` for ``rule``: its threshold, window and further
    parameters, from THRESHOLDS overridden by ``thresholds`` (the Learning page and the report use the defaults)."""
    limits = {**THRESHOLDS, **(thresholds or {})}
    window, extra = DETECTOR_SETTINGS[rule]
    return {
        "threshold": limits[rule],
        "window": int(limits[window]),
        **{name: limits[key] for name, key in extra.items()},
    }


def _detector_rule(rule: str, unit: str, windows: int, steps: str, describe):
    """A check for one detector: FAIL while it fires at the run's latest judged step (so a watch sends one alert
    when it starts and one when it stops), its message the latest figures and the first step it ever fired at.
    ``windows``: how many windows of steps it compares (the steps it needs before it judges one); ``steps``: which
    steps count; ``describe(row, params)``: the latest figures."""

    def check(con, run_id: str, limits: dict) -> CheckResult:
        params = detector_parameters(rule, limits)
        row = analyses.detector_summary(con, run_id, rule, **params)
        if not row.get("steps_judged"):
            message = f"nothing to judge yet: it needs {windows * params['window']} {steps}"
            return CheckResult(rule, True, None, params["threshold"], message, unit)
        message = f"{describe(row, params)}; {_history(row)}"
        ok, step = not row["firing"], row["latest_step"]
        return CheckResult(rule, ok, row["value"], params["threshold"], message, unit, step)

    check.__name__ = rule.replace("-", "_")
    return check


def _history(row: dict) -> str:
    if not row["steps_fired"]:
        return f"never fired in {row['steps_judged']:,} steps judged"
    where = f" ({row['first_environment']})" if row["first_environment"] else ""
    return (
        f"first fired at step {row['first_step']}{where}, {row['steps_fired']:,} of {row['steps_judged']:,} "
        f"steps judged, latest at step {row['last_step']}"
    )


def _in(row: dict) -> str:
    return f"{row['environment']}: " if row["environment"] else ""


_KL = {
    "kl": "KL to the reference",
    "policy_kl": "the update's KL (rl.train.policy_kl; no KL to the reference logged)",
}

DETECTOR_RULES = (
    _detector_rule(
        "entropy-collapse",
        "share",
        1,
        "train steps that logged the entropy (rl.train.entropy)",
        lambda r, p: (
            f"entropy {r['level']:.3g} nats over the {p['window']} steps to {r['latest_step']}, "
            f"{formats.rate(r['value'])} of its highest {p['window']}-step mean {r['reference']:.3g} (collapse at "
            f"{formats.rate(p['threshold'])} or less)"
        ),
    ),
    _detector_rule(
        "kl-acceleration",
        "times",
        3,
        "train steps that logged a KL (rl.train.kl, else rl.train.policy_kl)",
        lambda r, p: (
            f"{_KL[r['part']]} {r['reference']:.3g} → {r['level']:.3g} over the last two {p['window']}-step windows, "
            + (
                f"growing {formats.times(r['value'])} as fast as the window before"
                if r["value"] is not None
                else "after a window that did not grow"
            )
            + f" (accelerating from {formats.times(p['threshold'])}, and by {formats.rate(p['growth'])} of its level)"
        ),
    ),
    _detector_rule(
        "length-drift",
        "share",
        2,
        "consuming steps of an environment's rollouts with decoded tokens",
        lambda r, p: (
            f"{_in(r)}mean decoded tokens per rollout {r['reference']:,.0f} → {r['level']:,.0f} over the last two "
            f"{p['window']}-step windows, {formats.rate(r['value'])} (drift from ±{formats.rate(p['threshold'])})"
        ),
    ),
    _detector_rule(
        "length-limit",
        "share",
        1,
        "consuming steps of an environment's rollouts with turns",
        lambda r, p: (
            f"{_in(r)}{formats.rate(r['value'])} of rollouts cut off by a token limit (mostly the {r['part']} "
            f"limit) over the last {p['window']} steps (at most {formats.rate(p['threshold'])} allowed)"
        ),
    ),
    _detector_rule(
        "reward-dominance",
        "share",
        1,
        "consuming steps of an environment scored by two reward components or more",
        lambda r, p: (
            f"{_in(r)}{r['part']} is {formats.rate(r['value'])} of the reward's magnitude over the last "
            f"{p['window']} steps (a minor part at the start dominating from {formats.rate(p['threshold'])})"
        ),
    ),
    _detector_rule(
        "reward-divergence",
        "score",
        2,
        "consuming steps of an environment's scored rollouts",
        lambda r, p: (
            f"{_in(r)}the reward moved {r['level']:+.3f} and {r['part']} {-r['reference']:+.3f} (each on its own "
            f"scale) from one {p['window']}-step window to the next: {formats.number(r['value'], 3)} (a rise "
            f"and a fall of {p['threshold']:g} or more fire)"
        ),
    ),
    _detector_rule(
        "group-collapse",
        "share",
        2,
        "consuming steps with groups of scored rollouts",
        lambda r, p: (
            f"nonzero-signal rate {formats.rate(r['reference'])} → {formats.rate(r['level'])} over the last two "
            f"{p['window']}-step windows, {formats.rate(r['value'])} of it lost (collapse from "
            f"{formats.rate(p['threshold'])})"
        ),
    ),
    _detector_rule(
        "mismatch-rising",
        "times",
        2,
        "consuming steps whose samples recorded rl.sample.mismatch_kl",
        lambda r, p: (
            f"median train-inference KL per token {r['reference']:.3g} → {r['level']:.3g} over the last two "
            f"{p['window']}-step windows, {formats.times(r['value'])} (rising from {formats.times(p['threshold'])})"
        ),
    ),
)

RULES = (
    drafter_logprobs,
    acceptance_drift,
    staleness_violations,
    nonzero_signal,
    dropped_spans,
    mismatch_kl,
    stall,
    *DETECTOR_RULES,
)


def _range(lo: int | None, hi: int | None) -> str:
    """A min–max range as the check lines print it: ``3–7``, ``3`` when one value, ``unknown`` when none."""
    if lo is None:
        return "unknown"
    return str(lo) if lo == hi else f"{lo}–{hi}"
