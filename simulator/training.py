"""Is training going wrong: what the simulated trainer logs about each update, and the failures a run injects.

A healthy run's trainer logs, per train step, the policy's entropy slowly falling, its KL from the reference
slowly rising, a small clip fraction, a grad norm and a constant learning rate (each with a little noise drawn
from the step's own seed, so they change nothing else in the plan). Each failure of docs/metrics.md, "Detectors"
is a knob (``SimConfig``; off by default) that bends one figure from its onset step (``at``, a position in the
run) on: the entropy collapses (and, with ``until``, comes back), the KL accelerates, output lengths shift, a
minor reward component takes over the total, the reward is hacked (the judge's score rises while the verifier's
pass rate falls), the groups collapse onto one reward, the train-inference mismatch rises. ``failures`` lists
the ones a config injects, with their onset step and the rules that should fire there: the ground truth the
detectors are tested against. Every draw here comes from its own seeded generator (``rng_for``), so a run without
a failure (the shipped sample run) keeps every other figure of its plan.
"""

from __future__ import annotations

import math

from rollscope.simulator.config import SimConfig
from rollscope.simulator.sampling import rng_for

# Each failure knob, and the detector rules (queries/checks.py) its onset should fire.
FAILURES = {
    "entropy_collapse": ("entropy-collapse",),
    "kl_acceleration": ("kl-acceleration",),
    "length_shift": ("length-drift",),  # and length-limit when lengths grow into the limit (below)
    "reward_takeover": ("reward-dominance",),
    "reward_hacking": ("reward-divergence",),
    "group_collapse": ("group-collapse",),
    "mismatch_rising": ("mismatch-rising",),
}


def position(c: SimConfig, fraction: float) -> int:
    """The step at a position in the run, as the planner places its events."""
    return c.first_step + int(round(fraction * c.steps))


def onset(c: SimConfig, knob: str) -> int | None:
    """The step a failure starts at, or None when the config does not inject it."""
    failure = getattr(c, knob)
    return None if not failure else position(c, float(failure["at"]))


def _ramp(c: SimConfig, knob: str, s: int) -> float:
    """0 before the failure's onset, rising linearly to 1 over its ``steps`` (1: at once) and staying there;
    back to 0 from its ``until`` position, when it has one."""
    start = onset(c, knob)
    if start is None or s < start:
        return 0.0
    failure = getattr(c, knob)
    if failure.get("until") is not None and s >= position(c, float(failure["until"])):
        return 0.0
    return min(1.0, (s - start + 1) / max(1, int(failure.get("steps", 1))))


# --- what the trainer logs ------------------------------------------------------------------------------------


def signals(c: SimConfig, step: int, index: int) -> dict[str, float]:
    """The step's rl.train.* signals (store columns to values), rounded as a trainer's logs would be."""
    if not c.train_signals:
        return {}
    rng = rng_for(c.seed, "train-signals", step)
    x = index / max(1, c.steps - 1)
    entropy = c.entropy_start * (1 - c.entropy_decay * x) * math.exp(rng.gauss(0, 0.03))
    entropy *= 1 - _ramp(c, "entropy_collapse", step) * (1 - _knob(c, "entropy_collapse", "factor", 0.06))
    kl = (0.002 + c.kl_end * x) * math.exp(rng.gauss(0, 0.05)) + _kl_surge(c, step)
    return {
        "train_entropy": round(entropy, 6),
        "train_kl": round(kl, 6),
        "train_clip_fraction": round(min(1.0, 0.02 * math.exp(rng.gauss(0, 0.25))), 6),
        "train_grad_norm": round(0.4 * (1 - 0.3 * x) * math.exp(rng.gauss(0, 0.15)), 6),
        "train_learning_rate": c.learning_rate * min(1.0, (index + 1) / 5),  # a 5-step warm-up
    }


def _kl_surge(c: SimConfig, step: int) -> float:
    """The KL added once it accelerates: growing by ``rate`` a step (exponentially) from its onset."""
    start = onset(c, "kl_acceleration")
    if start is None or step < start:
        return 0.0
    rate = _knob(c, "kl_acceleration", "rate", 0.2)
    return 0.002 * (math.exp(rate * (step - start + 1)) - 1)


def _knob(c: SimConfig, knob: str, key: str, default: float) -> float:
    failure = getattr(c, knob) or {}
    return float(failure.get(key, default))


# --- the rollouts' side: lengths, rewards, groups, mismatch ---------------------------------------------------


def length_factor(c: SimConfig, step: int, environment: str) -> float:
    """How much the failure scales an environment's output lengths at a step (1: no change)."""
    failure = c.length_shift
    if not failure or environment not in failure.get("environments", [environment]):
        return 1.0
    return 1 + _ramp(c, "length_shift", step) * (float(failure["factor"]) - 1)


def nonzero_signal(c: SimConfig, step: int) -> float | None:
    """The nonzero-signal rate groups collapse to from the failure's onset (None: no collapse at this step)."""
    ramp = _ramp(c, "group_collapse", step)
    return None if ramp <= 0 else float(c.group_collapse.get("nonzero_signal", 0.1))


def mismatch_factor(c: SimConfig, step: int) -> float:
    """How much the train-inference mismatch has grown at a step: by ``rate`` a step from the onset."""
    start = onset(c, "mismatch_rising")
    if start is None or step < start:
        return 1.0
    return math.exp(_knob(c, "mismatch_rising", "rate", 0.12) * (step - start + 1))


def components(c: SimConfig, environment: str, step: int, rollout_id: str, success: bool) -> list[tuple]:
    """The extra scoring components of a rollout (``reward_components``): (name, score) per component. A
    "bonus" scores ``value`` with probability ``rate`` (a format or length bonus), whatever the answer; a
    "check" is a second verifier that passes a successful answer with probability ``rate``. A reward takeover
    ramps its component's bonus up to the failure's ``value``; reward hacking makes the check fail the answers
    the judge now scores high (``hacked``)."""
    out = []
    for spec in c.reward_components.get(environment, []):
        rng = rng_for(c.seed, "component", spec["name"], rollout_id)
        value = float(spec.get("value", 1.0))
        takeover = c.reward_takeover
        if takeover and takeover.get("component") == spec["name"] and environment == takeover["environment"]:
            value += _ramp(c, "reward_takeover", step) * (float(takeover["value"]) - value)
        if spec.get("kind") == "bonus":
            score = value if rng.random() < float(spec.get("rate", 1.0)) else 0.0
        else:
            passes = success and rng.random() < float(spec.get("rate", 1.0)) * (
                1 - hacked(c, environment, step)
            )
            score = value if passes else 0.0
        out.append((spec["name"], round(score, 4)))
    return out


def hacked(c: SimConfig, environment: str, step: int) -> float:
    """The share of an environment's answers that game the reward at a step: the judge scores them a success,
    a second verifier fails them (0 outside the failure)."""
    failure = c.reward_hacking
    if not failure or environment != failure["environment"]:
        return 0.0
    return _ramp(c, "reward_hacking", step) * float(failure.get("strength", 0.8))


# --- the ground truth -------------------------------------------------------------------------------------------


def failures(c: SimConfig) -> list[dict]:
    """The failures the config injects: the knob, its onset and end steps, and the rules that should fire."""
    out = []
    for knob, rules in FAILURES.items():
        start = onset(c, knob)
        if start is None:
            continue
        failure = getattr(c, knob)
        until = failure.get("until")
        rules = list(rules)
        if knob == "length_shift" and _into_the_limit(c, failure):
            rules.append("length-limit")
        out.append(
            {
                "failure": knob,
                "rules": rules,
                "onset_step": start,
                "until_step": None if until is None else position(c, float(until)),
            }
        )
    return out


def _into_the_limit(c: SimConfig, failure: dict) -> bool:
    """Whether a length shift grows an environment's mean output to half its limit or more: then a good share of
    its generations are cut off there (the lengths are lognormal) and the length-limit rule fires too."""
    shifted = [e for e in c.environments if e.name in failure.get("environments", [e.name])]
    factor = float(failure["factor"])
    return any(e.output_tokens * (1 + e.length_growth) * factor >= e.output_max / 2 for e in shifted)
