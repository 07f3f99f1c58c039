"""The ground truth of a simulated run: every figure of docs/metrics.md, computed from the plan.

It is written next to the run, at :func:`path`, as plain JSON whose keys are documented in
docs/simulator.md. The figures come from the plan the simulator followed, not from the store, so a test that
compares them with what `queries/` reads back checks the whole path: plan → spans → exporter → store → SQL.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rollscope.collectors.semconv import SAMPLE_DECISIONS as _DECISIONS
from rollscope.queries.funnel_stages import STAGES as _STAGES
from rollscope.simulator.config import SimConfig, to_dict
from rollscope.simulator.health import Health
from rollscope.simulator.plan import Rollout, StepPlan
from rollscope.simulator.records import Instance, train_loss

FORMAT = 1


def path(store: Path | str, run_id: str) -> Path:
    """Where a run's ground truth lives: ``STORE/ground_truth/<run_id>.json``."""
    return Path(store) / "ground_truth" / f"{run_id}.json"


def load(store: Path | str, run_id: str) -> dict:
    return json.loads(path(store, run_id).read_text())


def write(store: Path | str, run_id: str, truth: dict) -> Path:
    target = path(store, run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(truth, indent=1, sort_keys=False) + "\n")
    tmp.replace(target)
    return target


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


_GROUPS = {
    "funnel": _STAGES,
    "decisions": _DECISIONS,
    "prefill_decode": (
        "turns",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "context_tokens",
        "reprefill_waste_tokens",
    ),
    "tools": ("calls", "observation_tokens", "failed", "cpu_ns"),
    "spec_decode": ("turns", "draft_tokens", "accepted_tokens", "verify_steps", "drafter_logprob_turns"),
    "judge": ("spans", "input_tokens", "output_tokens", "timeouts"),
    "teacher": ("spans", "tokens"),
}


class Sums:
    """One rollout's contribution to every counter of a slice, computed once and added to several slices."""

    __slots__ = ("values", "staleness", "length", "duration_ns")

    def __init__(self, r: Rollout, ns, bound: int):
        fresh = r.signal and r.staleness <= bound
        decision = [r.decision == d for d in _DECISIONS]
        funnel = [1, r.completed, r.completed and r.scored, r.signal, fresh, fresh]
        pd, spec = [0] * 6, [0] * 5
        for t in r.turns:
            _add_turn(pd, spec, t)
        tools = [len(r.tools), 0, 0, 0]
        for call in r.tools:
            tools[1] += call.observation_tokens
            tools[2] += call.exit_code != 0
            tools[3] += ns(call.end) - ns(call.start)
        judge, teacher = [0] * 4, [0] * 2
        for s in r.scorings:
            if s.kind == "judge":
                judge = [
                    judge[0] + 1,
                    judge[1] + s.input_tokens,
                    judge[2] + s.output_tokens,
                    judge[3] + (s.status == "timeout"),
                ]
            elif s.kind == "teacher":
                teacher = [teacher[0] + 1, teacher[1] + s.tokens]
        self.values = {
            "funnel": funnel,
            "decisions": decision,
            "prefill_decode": pd,
            "tools": tools,
            "spec_decode": spec,
            "judge": judge,
            "teacher": teacher,
        }
        self.staleness = r.staleness
        self.length = pd[3]
        self.duration_ns = ns(r.end) - ns(r.start)


def _add_turn(pd: list, spec: list, t) -> None:
    pd[0] += 1
    pd[1] += t.input_tokens
    pd[2] += t.cached_input_tokens
    pd[3] += t.output_tokens
    pd[4] += t.context_tokens
    pd[5] += max(0, t.context_tokens - t.cached_input_tokens)
    if t.spec_k:
        spec[0] += 1
        spec[1] += t.draft_tokens
        spec[2] += t.accepted_tokens
        spec[3] += t.verify_steps
    spec[4] += t.logprobs_source == "drafter"


class Slice:
    """Counters over a set of rollouts (a run, a step, an environment) and everything they emitted."""

    def __init__(self, c: SimConfig):
        self.c = c
        self.sums = {group: [0] * len(keys) for group, keys in _GROUPS.items()}
        self.staleness: Counter = Counter()
        self.lengths: list[int] = []
        self.durations: list[int] = []

    def add(self, sums: Sums) -> None:
        for group, values in sums.values.items():
            acc = self.sums[group]
            for i, v in enumerate(values):
                acc[i] += v
        self.staleness[sums.staleness] += 1
        self.lengths.append(sums.length)
        self.durations.append(sums.duration_ns)

    def add_turn(self, t) -> None:
        _add_turn(self.sums["prefill_decode"], self.sums["spec_decode"], t)

    def group(self, name: str) -> dict[str, int]:
        return dict(zip(_GROUPS[name], self.sums[name], strict=True))

    def flops(self) -> dict[str, float]:
        return flops(self.c, self.sums)

    def to_dict(self) -> dict:
        f, pd, sp = self.group("funnel"), self.group("prefill_decode"), self.group("spec_decode")
        pd["new_input_tokens"] = pd["input_tokens"] - pd["cached_input_tokens"]
        pd["ratio"] = _rate(pd["new_input_tokens"], pd["output_tokens"])
        pd["cache_hit_rate"] = _rate(pd["cached_input_tokens"], pd["input_tokens"])
        sp["acceptance_rate"] = _rate(sp["accepted_tokens"], sp["draft_tokens"])
        sp["mean_accepted_length"] = _rate(sp["accepted_tokens"], sp["verify_steps"])
        tools = self.group("tools")
        tools["cpu_seconds"] = tools.pop("cpu_ns") / 1e9
        return {
            "funnel": {
                **f,
                "rates": {
                    "completion": _rate(f["completed"], f["dispatched"]),
                    "scoring": _rate(f["scored"], f["completed"]),
                    "nonzero_signal": _rate(f["nonzero_signal"], f["scored"]),
                    "freshness": _rate(f["fresh"], f["nonzero_signal"]),
                },
            },
            "decisions": self.group("decisions"),
            "prefill_decode": pd,
            "tools": tools,
            "spec_decode": sp,
            "staleness": self._staleness(),
            "judge": self.group("judge"),
            "teacher": self.group("teacher"),
            "compute": {"flops": self.flops()},
            "rollout_length": {
                "output_tokens": _quantiles(self.lengths),
                "duration_s": _quantiles([d / 1e9 for d in self.durations]),
            },
        }

    def _staleness(self) -> dict:
        n = sum(self.staleness.values())
        bound = self.c.staleness_bound
        fresh = sum(v for k, v in self.staleness.items() if k <= bound)
        return {
            "samples": n,
            "histogram": {str(k): self.staleness[k] for k in sorted(self.staleness)},
            "mean": _rate(sum(k * v for k, v in self.staleness.items()), n),
            "freshness_rate": _rate(fresh, n),
            "violations": n - fresh,
            "bound": bound,
        }


def flops(c: SimConfig, sums: dict[str, list]) -> dict[str, float]:
    """FLOPs as docs/metrics.md defines them: 2·P·tokens for each inference term."""
    pd, judge, teacher = sums["prefill_decode"], sums["judge"], sums["teacher"]
    return {
        "rollout": float(2 * c.rollout.model_parameters * (pd[1] - pd[2] + pd[3])),
        "judge": float(2 * c.judge.model_parameters * (judge[1] + judge[2])),
        "teacher": float(2 * c.teacher.model_parameters * teacher[1]),
    }


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    q = np.quantile(np.asarray(values, dtype=float), [0.5, 0.9, 0.99])
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2])}


class Intervals:
    """Work intervals of one process (ns), reduced to the length of their union at the end."""

    def __init__(self) -> None:
        self.starts = array("q")
        self.ends = array("q")

    def add(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)

    def union_ns(self) -> int:
        if not self.starts:
            return 0
        starts, ends = np.frombuffer(self.starts, np.int64), np.frombuffer(self.ends, np.int64)
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        reach = np.maximum.accumulate(e)
        first = np.empty(len(s), bool)
        first[0] = True
        first[1:] = s[1:] > reach[:-1]
        heads = np.flatnonzero(first)
        block_end = np.maximum.reduceat(e, heads)
        return int((block_end - s[heads]).sum())


@dataclass(frozen=True)
class _StepTimes:
    """What the ground truth keeps of a step once its rollouts are counted (not the rollouts: memory)."""

    step: int
    policy_version: int
    start: float
    ready: float
    end: float
    train_tokens: int
    train_samples: int

    @classmethod
    def of(cls, p: StepPlan) -> _StepTimes:
        return cls(p.step, p.policy_version, p.start, p.ready, p.end, p.train_tokens, p.train_samples)


class Truth:
    """Accumulates the ground truth step by step while the plan is emitted."""

    def __init__(self, c: SimConfig, run_id: str, preset: str, procs: list[Instance], ns):
        self.c, self.run_id, self.preset, self.ns = c, run_id, preset, ns
        self.procs = procs
        self.run = Slice(c)
        self.steps: list[tuple[_StepTimes, Slice]] = []
        self.envs = {e.name: Slice(c) for e in c.environments}
        self.step_envs: dict[tuple[int, str], Slice] = {}
        self.versions: dict[int, tuple[str, int, Slice]] = {}
        self.busy = {p.key: Intervals() for p in procs}
        self.span_counts: Counter = Counter()
        self.instance_spans: Counter = Counter()
        self.trainer = {"steps": 0, "duration_ns": 0, "wait_ns": 0, "train_tokens": 0, "train_samples": 0}
        self.waste = {"wasted": 0.0, "total": 0.0}
        self.work = dict.fromkeys(
            ("output_tokens", "reprefill_waste_tokens", "train_tokens", "teacher_tokens"), 0
        )
        self.learning = Learning(c, ns)
        self.health = Health(c, procs, run_id)
        self.silent_window = None  # the planner's silent worker (simulator.health), set by simulate()

    def add_step(self, plan: StepPlan, records: dict[str, list[tuple]]) -> None:
        step = Slice(self.c)
        for r in plan.rollouts:
            self._rollout(r, step)
        self.steps.append((_StepTimes.of(plan), step))
        self._trainer(plan)
        self.learning.add_step(plan)
        self.health.add_step(plan, records)
        for key, recs in records.items():
            self.instance_spans[key] += len(recs)
            for rec in recs:
                name = rec[0]
                self.span_counts["execute_tool" if name.startswith("execute_tool") else name] += 1

    def _rollout(self, r: Rollout, step: Slice) -> None:
        sums = Sums(r, self.ns, self.c.staleness_bound)
        for s in (self.run, step, self.envs[r.env.name], self._step_env(r)):
            s.add(sums)
        spent = sum(flops(self.c, sums.values).values())
        self.waste["total"] += spent
        if r.decision == "used":
            self.work["output_tokens"] += sums.length
            self.work["reprefill_waste_tokens"] += sums.values["prefill_decode"][5]
            self.work["train_tokens"] += r.trajectory_tokens
            self.work["teacher_tokens"] += sums.values["teacher"][1]
        else:
            self.waste["wasted"] += spent
        self._busy(r)
        for t in r.turns:
            self._version(r, t)

    def _step_env(self, r: Rollout) -> Slice:
        key = (r.step, r.env.name)
        if key not in self.step_envs:
            self.step_envs[key] = Slice(self.c)
        return self.step_envs[key]

    def _version(self, r: Rollout, t) -> None:
        if r.policy_version not in self.versions:
            self.versions[r.policy_version] = (r.drafter_version, r.drafter_policy_version, Slice(self.c))
        self.versions[r.policy_version][2].add_turn(t)

    def _busy(self, r: Rollout) -> None:
        ns = self.ns
        server = self.busy[f"rollout-server-{r.server}"]
        for t in r.turns:
            server.add(ns(t.start), ns(t.end))
        for s in r.scorings:
            if s.kind in ("judge", "teacher"):
                self.busy[f"{s.kind}-{s.instance}"].add(ns(s.start), ns(s.end))

    def _trainer(self, p: StepPlan) -> None:
        ns, t = self.ns, self.trainer
        t["steps"] += 1
        t["duration_ns"] += ns(p.end) - ns(p.start)
        t["wait_ns"] += ns(p.ready) - ns(p.start)
        t["train_tokens"] += p.train_tokens
        t["train_samples"] += p.train_samples
        self.busy["trainer-0"].add(ns(p.ready), ns(p.end))

    # --- the document ---------------------------------------------------------------------------------------

    def document(self, events: dict, digest: str | None) -> dict:
        return {
            "format": FORMAT,
            "run_id": self.run_id,
            "seed": self.c.seed,
            "preset": self.preset,
            "config": to_dict(self.c),
            "content_digest": digest,
            "spans": {
                "total": sum(self.span_counts.values()),
                "by_name": dict(sorted(self.span_counts.items())),
            },
            "run": self._run(),
            "by_step": [self._step(p, s) for p, s in self.steps],
            "by_environment": {name: s.to_dict() for name, s in self.envs.items()},
            "by_step_environment": [
                {"train_step": step, "environment": env, "funnel": s.to_dict()["funnel"]}
                for (step, env), s in sorted(self.step_envs.items())
            ],
            "by_policy_version": [self._version_row(v) for v in sorted(self.versions)],
            "processes": self._processes(),
            "learning": self.learning.document(),
            "events": events,
            "health": self.health.document(self.silent_window, self.ns),
        }

    def _run(self) -> dict:
        out = self.run.to_dict()
        c, t = self.c, self.trainer
        busy = self._busy_by_role()
        flops = out["compute"]["flops"]
        flops["train"] = float(6 * c.trainer.model_parameters * t["train_tokens"])
        flops["total"] = sum(flops.values())
        out["compute"].update(
            {
                "device_seconds": {role: d for role, (_, d) in busy.items()},
                "busy_seconds": {role: b for role, (b, _) in busy.items()},
                "env_cpu_seconds": out["tools"]["cpu_seconds"],
                "wasted_share": _rate(self.waste["wasted"], self.waste["total"]),
            }
        )
        out["work_per_token"] = dict(self.work)
        out["trainer"] = {
            "steps": t["steps"],
            "duration_s": t["duration_ns"] / 1e9,
            "wait_s": t["wait_ns"] / 1e9,
            "compute_s": (t["duration_ns"] - t["wait_ns"]) / 1e9,
            "idle_fraction": _rate(t["wait_ns"], t["duration_ns"]),
            "train_tokens": t["train_tokens"],
            "train_samples": t["train_samples"],
        }
        return out

    def _busy_by_role(self) -> dict[str, tuple[float, float]]:
        out = {role: (0.0, 0.0) for role in ("rollout", "train", "teacher", "judge")}
        for p in self.procs:
            if p.role in out:
                seconds = self.busy[p.key].union_ns() / 1e9
                b, d = out[p.role]
                out[p.role] = (b + seconds, d + seconds * p.devices)
        return out

    def _step(self, p: _StepTimes, s: Slice) -> dict:
        ns = self.ns
        out = {"train_step": p.step, "policy_version": p.policy_version, **s.to_dict()}
        out["compute"]["flops"]["train"] = float(6 * self.c.trainer.model_parameters * p.train_tokens)
        out["compute"]["flops"]["total"] = sum(out["compute"]["flops"].values())
        out["trainer"] = {
            "duration_s": (ns(p.end) - ns(p.start)) / 1e9,
            "wait_s": (ns(p.ready) - ns(p.start)) / 1e9,
            "train_tokens": p.train_tokens,
            "train_samples": p.train_samples,
        }
        return out

    def _version_row(self, v: int) -> dict:
        drafter, built, s = self.versions[v]
        return {
            "policy_version": v,
            "drafter_version": drafter,
            "drafter_policy_version": built,
            "versions_since_refresh": v - built,
            "spec_decode": s.to_dict()["spec_decode"],
        }

    def _processes(self) -> list[dict]:
        out = []
        for p in self.procs:
            busy = self.busy[p.key].union_ns() / 1e9 if p.role != "env" else None
            out.append(
                {
                    "service_name": p.service_name,
                    "instance_id": instance_id(p, self.run_id),
                    "role": p.role,
                    "devices": p.devices,
                    "model_name": p.model_name,
                    "model_parameters": p.model_parameters,
                    "spans": self.instance_spans[p.key],
                    "busy_seconds": busy,
                    "device_seconds": busy * p.devices if busy is not None else None,
                }
            )
        return out


SUCCESS_THRESHOLD = 0.5  # a scored rollout succeeded when its reward is at least this (docs/semconv.md)
_ZERO_SIGNAL_KINDS = ("all_wrong", "all_right", "other_equal", "group_too_small")


class Learning:
    """Is it learning: rewards, success and loss per step, why groups carry no signal, per-task solve rates
    and the train-inference mismatch, from the plan (docs/simulator.md, key ``learning``)."""

    def __init__(self, c: SimConfig, ns):
        self.c, self.ns = c, ns
        self.step_ends: list[tuple[int, int]] = []  # (end ns, policy version produced) of the steps so far
        self.bias = {"kept": [], "dropped stale": []}  # (decoded tokens, duration s, reward) per rollout
        self.by_step: list[dict] = []
        self.rewards: list[float] = []
        self.tasks: dict[str, list[int]] = {}  # task -> [scored attempts, successes]
        self.zero = {kind: {"groups": 0, "rollouts": 0} for kind in _ZERO_SIGNAL_KINDS}
        self.by_env_zero: dict[str, dict] = {}
        self.mismatch: list[tuple] = []

    def add_step(self, p: StepPlan) -> None:
        rewards = [r.reward for r in p.rollouts if r.scored and r.reward is not None]
        self.rewards += rewards
        for r in p.rollouts:
            if r.scored and r.reward is not None:
                counts = self.tasks.setdefault(r.task_id, [0, 0])
                counts[0] += 1
                counts[1] += r.reward >= SUCCESS_THRESHOLD
        zero = self._zero_signal(p)
        recorded = self.c.emit_samples  # the trainer records the mismatch on its rl.sample spans
        mismatch = [r.mismatch for r in p.rollouts if r.mismatch is not None and recorded]
        self.mismatch += mismatch
        self.by_step.append(
            {
                "train_step": p.step,
                "train_loss": train_loss(self.c, p),
                **_reward_figures(rewards),
                "zero_signal": zero,
                "mismatch": _mismatch_figures(mismatch),
                "staleness_timing": self._timing(p),
            }
        )
        self.step_ends.append((self.ns(p.end), p.policy_version))
        for r in p.rollouts:
            kind = {"used": "kept", "stale": "dropped stale"}.get(r.decision)
            if kind is not None:
                tokens = sum(t.output_tokens for t in r.turns)
                self.bias[kind].append((tokens, (self.ns(r.end) - self.ns(r.start)) / 1e9, r.reward))

    def _timing(self, p: StepPlan) -> dict:
        """Where each consumed sample's staleness came from: in flight (generating) or queued (waiting)."""
        ns, flight_s, queued_s, flight_v, stale = self.ns, [], [], [], []
        for r in p.rollouts:
            end = ns(r.end)
            newest = max((v for e, v in self.step_ends if e <= end), default=r.policy_version)
            flight_s.append((end - ns(r.start)) / 1e9)
            queued_s.append(max(0, ns(p.ready) - end) / 1e9)
            flight_v.append(min(r.staleness, max(0, newest - r.policy_version)))
            stale.append(r.staleness)
        n = len(stale)
        return {
            "samples": n,
            "in_flight_s_mean": float(np.mean(flight_s)),
            "in_flight_s_p90": float(np.quantile(flight_s, 0.9)),
            "queued_s_mean": float(np.mean(queued_s)),
            "queued_s_p90": float(np.quantile(queued_s, 0.9)),
            "staleness_mean": sum(stale) / n,
            "in_flight_versions_mean": sum(flight_v) / n,
            "queued_versions_mean": (sum(stale) - sum(flight_v)) / n,
        }

    def _zero_signal(self, p: StepPlan) -> dict:
        step = {kind: {"groups": 0, "rollouts": 0} for kind in _ZERO_SIGNAL_KINDS}
        groups: dict[str, list] = {}
        for r in p.rollouts:
            groups.setdefault(r.group_id, []).append(r)
        for members in groups.values():
            lost = [r for r in members if r.decision == "zero_signal"]
            if not lost:
                continue
            scored = [r.reward for r in members if r.scored and r.reward is not None]
            kind = _zero_kind(scored)
            env = self.by_env_zero.setdefault(
                lost[0].env.name, {k: {"groups": 0, "rollouts": 0} for k in _ZERO_SIGNAL_KINDS}
            )
            for table in (step, self.zero, env):
                table[kind]["groups"] += 1
                table[kind]["rollouts"] += len(lost)
        return step

    def document(self) -> dict:
        solve = {task: s / n for task, (n, s) in sorted(self.tasks.items()) if n}
        return {
            "success_threshold": SUCCESS_THRESHOLD,
            "run": {**_reward_figures(self.rewards), "mismatch": _mismatch_figures(self.mismatch)},
            "zero_signal": self.zero,
            "zero_signal_by_environment": self.by_env_zero,
            "tasks": {
                "attempted": len(solve),
                "always_solved": sorted(t for t, r in solve.items() if r == 1.0),
                "never_solved": sorted(t for t, r in solve.items() if r == 0.0),
                "solve_rate": solve,
            },
            "stale_bias": {kind: _bias_figures(rows) for kind, rows in self.bias.items()},
            "by_step": self.by_step,
        }


def _zero_kind(scored: list[float]) -> str:
    if len(scored) < 2 or min(scored) != max(scored):
        return "group_too_small"
    if scored[0] <= 0:
        return "all_wrong"
    return "all_right" if scored[0] >= 1 else "other_equal"


def _reward_figures(rewards: list[float]) -> dict:
    if not rewards:
        return {
            "scored": 0,
            "reward_mean": None,
            "reward_p10": None,
            "reward_p50": None,
            "reward_p90": None,
            "success_rate": None,
        }
    q = np.quantile(np.asarray(rewards, dtype=float), [0.1, 0.5, 0.9])
    return {
        "scored": len(rewards),
        "reward_mean": float(np.mean(rewards)),
        "reward_p10": float(q[0]),
        "reward_p50": float(q[1]),
        "reward_p90": float(q[2]),
        "success_rate": sum(r >= SUCCESS_THRESHOLD for r in rewards) / len(rewards),
    }


def _bias_figures(rows: list[tuple]) -> dict:
    n = len(rows)
    if not n:
        return {
            "rollouts": 0,
            "decoded_tokens_mean": None,
            "duration_s_mean": None,
            "reward_mean": None,
            "success_rate": None,
        }
    return {
        "rollouts": n,
        "decoded_tokens_mean": sum(r[0] for r in rows) / n,
        "duration_s_mean": sum(r[1] for r in rows) / n,
        "reward_mean": sum(r[2] for r in rows) / n,
        "success_rate": sum(r[2] >= SUCCESS_THRESHOLD for r in rows) / n,
    }


def _mismatch_figures(values: list[tuple]) -> dict:
    if not values:
        return {"samples": 0, "mismatch_kl_mean": None, "mismatch_kl_max": None, "logprob_diff_max": None}
    kls = [v[0] for v in values]
    return {
        "samples": len(values),
        "mismatch_kl_mean": sum(kls) / len(kls),
        "mismatch_kl_max": max(kls),
        "logprob_diff_max": max(v[2] for v in values),
    }


def instance_id(p: Instance, run_id: str) -> str:
    return f"{p.key}@{run_id}"


# --- reproducibility ------------------------------------------------------------------------------------------

_VOLATILE_RESOURCE = ("process.pid", "telemetry.sdk.version")
_ID_COLUMNS = ("trace_id", "span_id", "parent_span_id", "instance_id")


def content_digest(store: Path | str, run_id: str, *, ids: bool = True) -> str:
    """sha256 of the run's span rows in canonical order, process ids and SDK versions left out.

    Two runs of the same seed and config give the same digest on any machine, with any number of workers,
    compacted or not. With ``ids=False`` span, trace and instance ids are left out too, so two runs of
    the same seed under different run ids (whose ids differ) compare equal.
    """
    table = _canonical_table(store, run_id, ids)
    digest = hashlib.sha256()
    for name in table.column_names:
        values = table.column(name).to_pylist()
        if name == "resource_attributes":
            values = [_stable_resource(v, ids) for v in values]
        digest.update(name.encode())
        digest.update(json.dumps(values, default=_bytes_hex, separators=(",", ":")).encode())
    return digest.hexdigest()


def _canonical_table(store: Path | str, run_id: str, ids: bool):
    """All span rows of the run, columns by name, rows sorted by ids (or by every column without them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollscope.store.layout import segments
    from rollscope.store.schema import SPAN_SCHEMA

    tables = [pq.read_table(f) for f in segments(store, "spans", run_id)]
    table = pa.concat_tables(tables, promote_options="default") if tables else SPAN_SCHEMA.empty_table()
    if not ids:
        table = table.drop_columns([c for c in _ID_COLUMNS if c in table.column_names])
    table = table.select(sorted(table.column_names))
    keys = ["trace_id", "span_id"] if ids else [n for n in table.column_names if n != "resource_attributes"]
    return table.sort_by([(k, "ascending") for k in keys])


def _stable_resource(text: str | None, ids: bool) -> str | None:
    if text is None:
        return None
    volatile = _VOLATILE_RESOURCE if ids else (*_VOLATILE_RESOURCE, "service.instance.id")
    attrs = json.loads(text)
    return json.dumps({k: v for k, v in sorted(attrs.items()) if k not in volatile})


def _bytes_hex(value):
    return value.hex() if isinstance(value, bytes) else str(value)
