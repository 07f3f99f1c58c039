"""The ground truth of a simulated run: every figure of docs/metrics.md, computed from the plan.

It is written next to the run, at :func:`path`, as plain JSON whose keys are documented in
docs/simulator.md. The figures come from the plan the simulator followed, not from the store, so a test that
compares them with what `queries/` reads back checks the whole path: plan → spans → exporter → store → SQL.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rollscope.semconv import COMPUTE_TERMS, FUNNEL_STAGES
from rollscope.semconv import SAMPLE_DECISIONS as _DECISIONS
from rollscope.simulator import training
from rollscope.simulator.config import SimConfig, to_dict
from rollscope.simulator.health import Health
from rollscope.simulator.plan import StepPlan
from rollscope.simulator.records import Instance, SpanBuilder, StepSpans, train_loss
from rollscope.simulator.transcripts import Truth as TranscriptTruth

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


# docs/metrics.md, "Repeated prefill by remedy": a turn's prefill split by what would remove it, and the
# compaction it starts from (each an extra training sample)
PREFILL_SPLIT = (
    "new_tokens",
    "cached_tokens",
    "reprefill_retokenized_tokens",
    "reprefill_evicted_tokens",
    "reprefill_server_changed_tokens",
    "reprefill_compacted_tokens",
    "reprefill_unattributed_tokens",
    "prompt_reprefill_tokens",
    "compactions",
    "compaction_removed_tokens",
    "compaction_after_tokens",
)
_GROUPS = {
    "funnel": FUNNEL_STAGES,
    "decisions": _DECISIONS,
    "prefill_decode": (
        "turns",
        "input_tokens",
        "cached_input_tokens",
        "output_tokens",
        "context_tokens",
        "reprefill_waste_tokens",
    ),
    "prefill_split": PREFILL_SPLIT,
    "tools": ("calls", "observation_tokens", "failed", "cpu_ns"),
    "spec_decode": ("turns", "draft_tokens", "accepted_tokens", "verify_steps", "drafter_logprob_turns"),
    "judge": ("spans", "input_tokens", "output_tokens", "timeouts"),
    "teacher": ("spans", "tokens"),
}


_SLOTS = {group: len(keys) for group, keys in _GROUPS.items()}
_AT = {}  # group -> (first, last + 1) in a flat row of counters
for _group, _n in _SLOTS.items():
    _first = sum(_SLOTS[g] for g in list(_SLOTS)[: list(_SLOTS).index(_group)])
    _AT[_group] = (_first, _first + _n)
_WIDTH = sum(_SLOTS.values())


def _column(group: str, key: str) -> int:
    return _AT[group][0] + _GROUPS[group].index(key)


class StepCounts:
    """A step's counters, one row per rollout (``rows``, columns as ``_GROUPS`` laid end to end) and one
    per turn (``turn_rows``: the prefill/decode and speculative-decoding counters), from the plan's columns
    with array sums: each figure is counted once here and added to every slice it belongs to."""

    def __init__(self, p: StepPlan, ns_array, bound: int):
        R = len(p.rollouts)
        t, tools = p.turns, p.tools
        self.turn_rows = _turn_rows(t)
        self.split_rows = _split_rows(p, ns_array)
        self.turn_index = t.index
        rows = np.zeros((R, _WIDTH), dtype=np.int64)
        if R:
            pd_first, pd_last = _AT["prefill_decode"]
            sp_first, sp_last = _AT["spec_decode"]
            split_first, split_last = _AT["prefill_split"]
            per_turn = np.concatenate([self.turn_rows, self.split_rows], axis=1)
            summed = np.stack(
                [
                    np.bincount(t.rollout, weights=per_turn[:, i], minlength=R)
                    for i in range(per_turn.shape[1])
                ],
                axis=1,
            ).astype(np.int64)
            rows[:, pd_first:pd_last] = summed[:, :6]
            rows[:, sp_first:sp_last] = summed[:, 6:11]
            rows[:, split_first:split_last] = summed[:, 11:]
            tl_first, _ = _AT["tools"]
            cpu = (ns_array(tools.end) - ns_array(tools.start)).astype(float)
            rows[:, tl_first] = np.bincount(tools.rollout, minlength=R)
            rows[:, tl_first + 1] = np.bincount(tools.rollout, weights=tools.observation_tokens, minlength=R)
            rows[:, tl_first + 2] = np.bincount(tools.rollout, weights=tools.exit_code != 0, minlength=R)
            rows[:, tl_first + 3] = np.bincount(tools.rollout, weights=cpu, minlength=R)
        for i, r in enumerate(p.rollouts):
            fresh = r.signal and r.staleness <= bound
            row = rows[i]
            f0 = _AT["funnel"][0]
            row[f0 : f0 + 6] = (1, r.completed, r.completed and r.scored, r.signal, fresh, fresh)
            row[_AT["decisions"][0] + _DECISIONS.index(r.decision)] = 1
            for sc in r.scorings:
                if sc.kind == "judge":
                    j = _AT["judge"][0]
                    row[j : j + 4] += (1, sc.input_tokens, sc.output_tokens, sc.status == "timeout")
                elif sc.kind == "teacher":
                    row[_AT["teacher"][0] : _AT["teacher"][1]] += (1, sc.tokens)
        self.rows = rows
        self.staleness = np.asarray([r.staleness for r in p.rollouts], dtype=np.int64)
        self.lengths = rows[:, _column("prefill_decode", "output_tokens")]
        times = np.asarray([(r.start, r.end) for r in p.rollouts], dtype=float).reshape(-1, 2)
        self.durations = ns_array(times[:, 1]) - ns_array(times[:, 0])


def _turn_rows(t) -> np.ndarray:
    """Per turn: the prefill/decode counters, then the speculative-decoding ones."""
    spec = t.spec_k > 0
    return (
        np.stack(
            [
                np.ones(len(t), dtype=np.int64),
                t.input_tokens,
                t.cached_input_tokens,
                t.output_tokens,
                t.context_tokens,
                np.maximum(0, t.context_tokens - t.cached_input_tokens),
                spec,
                np.where(spec, t.draft_tokens, 0),
                np.where(spec, t.accepted_tokens, 0),
                np.where(spec, t.verify_steps, 0),
                t.drafter,
            ],
            axis=1,
        )
        .astype(np.int64)
        .reshape(-1, 11)
    )


def _split_rows(p: StepPlan, ns_array) -> np.ndarray:
    """Per turn, the prefill split of docs/metrics.md ("Repeated prefill by remedy"), in the order of
    ``_GROUPS["prefill_split"]``: tokens from the cache, history prefilled again by reason, the task prompt a
    group member prefilled again, the new rest; and the compaction the turn starts from."""
    t = p.turns
    inputs, context = t.input_tokens, t.context_tokens
    served = np.minimum(t.cached_input_tokens, inputs)
    again = np.minimum(np.maximum(0, context - t.cached_input_tokens), inputs - served)
    compacted = t.compact_before > 0
    recorded = np.where(compacted, 3, t.continuity)  # 1 evicted, 2 server_changed, 3 compacted
    reason = np.where(recorded > 0, recorded + 1, np.where((t.index > 0) & (t.prefix < context), 1, 5))
    by_reason = [np.where(reason == code, again, 0) for code in (1, 2, 3, 4, 5)]
    prompt = _prompt_again(p, ns_array, served)
    return (
        np.stack(
            [
                inputs - served - again - prompt,
                served,
                *by_reason,
                prompt,
                compacted,
                np.where(compacted, t.compact_before - t.compact_after, 0),
                t.compact_after,
            ],
            axis=1,
        )
        .astype(np.int64)
        .reshape(-1, len(_GROUPS["prefill_split"]))
    )


def _prompt_again(p: StepPlan, ns_array, served: np.ndarray) -> np.ndarray:
    """Per turn, the task prompt a group member prefilled on its first turn although another member of its
    group had: each member's first turn prefills its prompt less what it found cached; the member that
    prefilled the most (then the first to start, then the lowest rollout id) is the one that had to."""
    t, out = p.turns, np.zeros(len(p.turns), dtype=np.int64)
    firsts = np.flatnonzero(t.index == 0)
    starts = ns_array(t.start[firsts])
    groups: dict[str, list[tuple]] = {}
    for j, start in zip(firsts.tolist(), starts.tolist(), strict=True):
        r = p.rollouts[t.rollout[j]]
        if r.group_id is not None:
            own = max(0, min(r.prompt, int(t.input_tokens[j])) - int(served[j]))
            groups.setdefault(r.group_id, []).append((-own, start, r.rollout_id, j, own))
    for members in groups.values():
        for *_, j, own in sorted(members)[1:]:
            out[j] = own
    return out


class Slice:
    """Counters over a set of rollouts (a run, a step, an environment) and everything they emitted."""

    def __init__(self, c: SimConfig):
        self.c = c
        self.counts = np.zeros(_WIDTH, dtype=np.int64)
        self.staleness: Counter = Counter()
        self.lengths: list[np.ndarray] = []
        self.durations: list[np.ndarray] = []

    @property
    def sums(self) -> dict[str, list[int]]:
        flat = self.counts.tolist()
        return {group: flat[a:b] for group, (a, b) in _AT.items()}

    def add(self, counts: StepCounts, rows: np.ndarray | slice = slice(None)) -> None:
        """Add these rollouts of the step (all of them by default)."""
        self.counts += counts.rows[rows].sum(axis=0)
        self.staleness.update(counts.staleness[rows].tolist())
        self.lengths.append(counts.lengths[rows])
        self.durations.append(counts.durations[rows])

    def add_turns(self, turn_rows: np.ndarray) -> None:
        """Add turns' counters alone (a policy version's slice)."""
        summed = turn_rows.sum(axis=0)
        pd, spec = _AT["prefill_decode"][0], _AT["spec_decode"][0]
        self.counts[pd : pd + 6] += summed[:6]
        self.counts[spec : spec + 5] += summed[6:11]

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
            "prefill_split": self.group("prefill_split"),
            "tools": tools,
            "spec_decode": sp,
            "staleness": self._staleness(),
            "judge": self.group("judge"),
            "teacher": self.group("teacher"),
            "compute": {"flops": self.flops()},
            "rollout_length": {
                "output_tokens": _quantiles(np.concatenate([[], *self.lengths])),
                "duration_s": _quantiles(np.concatenate([[], *self.durations]) / 1e9),
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


def _quantiles(values) -> dict[str, float | None]:
    if not len(values):
        return {"p50": None, "p90": None, "p99": None}
    q = np.quantile(np.asarray(values, dtype=float), [0.5, 0.9, 0.99])
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2])}


class Intervals:
    """Work intervals of one process (ns), reduced to the length of their union at the end."""

    def __init__(self) -> None:
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []

    def add(self, start, end) -> None:
        """One interval, or arrays of them."""
        self.starts.append(np.atleast_1d(np.asarray(start, dtype=np.int64)))
        self.ends.append(np.atleast_1d(np.asarray(end, dtype=np.int64)))

    def union_ns(self) -> int:
        if not self.starts:
            return 0
        starts, ends = np.concatenate(self.starts), np.concatenate(self.ends)
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

    def __init__(self, c: SimConfig, run_id: str, preset: str, procs: list[Instance], builder: SpanBuilder):
        self.c, self.run_id, self.preset = c, run_id, preset
        self.ns, self.ns_array = builder.ns, builder.ns_array
        ns = self.ns
        self.procs = procs
        self.run = Slice(c)
        self.steps: list[tuple[_StepTimes, Slice]] = []
        self.envs = {e.name: Slice(c) for e in c.environments}
        self.step_envs: dict[tuple[int, str], Slice] = {}
        self.versions: dict[int, tuple[str, int, Slice]] = {}
        self.turn_indices = np.zeros(
            (0, len(_GROUPS["prefill_split"])), dtype=np.int64
        )  # split per turn index
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
        self.transcripts = TranscriptTruth()
        self.silent_window = None  # the planner's silent worker (simulator.health), set by simulate()

    def add_step(self, plan: StepPlan, spans: StepSpans) -> None:
        counts = StepCounts(plan, self.ns_array, self.c.staleness_bound)
        step = Slice(self.c)
        step.add(counts)
        self.run.add(counts)
        env_of = np.asarray([r.env.name for r in plan.rollouts], dtype=object)
        for name in dict.fromkeys(env_of.tolist()):
            mine = env_of == name
            self.envs[name].add(counts, mine)
            key = (plan.step, name)
            if key not in self.step_envs:
                self.step_envs[key] = Slice(self.c)
            self.step_envs[key].add(counts, mine)
        self.steps.append((_StepTimes.of(plan), step))
        self._work(plan, counts)
        self._versions(plan, counts)
        self._turn_indices(counts)
        self._busy(plan)
        self._trainer(plan)
        self.learning.add_step(plan, counts.lengths)
        self.health.add_step(plan, spans)
        self.transcripts.add_step(plan, spans.flags, spans.messages)
        self.instance_spans.update(spans.counts())
        for recs in spans.records.values():
            for rec in recs:
                self.span_counts[rec[0]] += 1
        for table in spans.tables:
            self.span_counts.update(table.name.counts())
        for name in [n for n in self.span_counts if n.startswith("execute_tool ")]:
            self.span_counts["execute_tool"] += self.span_counts.pop(name)

    def _work(self, p: StepPlan, counts: StepCounts) -> None:
        """FLOPs spent on each rollout, wasted when it is not used; work per used token."""
        rows = counts.rows
        pd, judge, teacher = (_AT[g][0] for g in ("prefill_decode", "judge", "teacher"))
        c = self.c
        spent = (
            2.0 * c.rollout.model_parameters * (rows[:, pd + 1] - rows[:, pd + 2] + rows[:, pd + 3])
            + 2.0 * c.judge.model_parameters * (rows[:, judge + 1] + rows[:, judge + 2])
            + 2.0 * c.teacher.model_parameters * rows[:, teacher + 1]
        )
        used = np.asarray([r.decision == "used" for r in p.rollouts], dtype=bool)
        self.waste["total"] += float(spent.sum())
        self.waste["wasted"] += float(spent[~used].sum())
        self.work["output_tokens"] += int(rows[used, pd + 3].sum())
        self.work["reprefill_waste_tokens"] += int(rows[used, pd + 5].sum())
        self.work["train_tokens"] += sum(
            r.trajectory_tokens for r, u in zip(p.rollouts, used, strict=True) if u
        )
        self.work["teacher_tokens"] += int(rows[used, teacher + 1].sum())

    def _versions(self, p: StepPlan, counts: StepCounts) -> None:
        if not len(p.turns):
            return
        version = np.asarray([r.policy_version for r in p.rollouts], dtype=np.int64)[p.turns.rollout]
        for v in np.unique(version).tolist():
            if v not in self.versions:
                r = next(r for r in p.rollouts if r.policy_version == v)
                self.versions[v] = (r.drafter_version, r.drafter_policy_version, Slice(self.c))
            self.versions[v][2].add_turns(counts.turn_rows[version == v])

    def _turn_indices(self, counts: StepCounts) -> None:
        if not len(counts.turn_index):
            return
        deepest = int(counts.turn_index.max()) + 1
        if deepest > len(self.turn_indices):
            grown = np.zeros((deepest, self.turn_indices.shape[1]), dtype=np.int64)
            grown[: len(self.turn_indices)] = self.turn_indices
            self.turn_indices = grown
        np.add.at(self.turn_indices, counts.turn_index, counts.split_rows)

    def _busy(self, p: StepPlan) -> None:
        ns = self.ns
        server = np.asarray([r.server for r in p.rollouts], dtype=np.int64)[p.turns.rollout]
        starts, ends = self.ns_array(p.turns.start), self.ns_array(p.turns.end)
        for k in np.unique(server).tolist():
            mine = server == k
            self.busy[f"rollout-server-{k}"].add(starts[mine], ends[mine])
        for r in p.rollouts:
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

    def document(self, events: dict, digest: str | None, messages_digest: str | None = None) -> dict:
        return {
            "format": FORMAT,
            "run_id": self.run_id,
            "seed": self.c.seed,
            "preset": self.preset,
            "config": to_dict(self.c),
            "content_digest": digest,
            "messages_digest": messages_digest,
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
            "by_turn_index": [
                {
                    "turn_index": k,
                    "prefill_split": dict(zip(_GROUPS["prefill_split"], row.tolist(), strict=True)),
                }
                for k, row in enumerate(self.turn_indices)
                if row.any()
            ],
            "processes": self._processes(),
            "learning": self.learning.document(),
            "events": events,
            "health": self.health.document(self.silent_window, self.ns),
            "transcripts": self.transcripts.document(),
            "failures": training.failures(self.c),
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
        out = {role: (0.0, 0.0) for role in COMPUTE_TERMS}
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

    def add_step(self, p: StepPlan, lengths: np.ndarray) -> None:
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
                "train_signals": training.signals(self.c, p.step, p.index),
                "truncation": _truncation(p),
            }
        )
        self.step_ends.append((self.ns(p.end), p.policy_version))
        for r, tokens in zip(p.rollouts, lengths.tolist(), strict=True):
            kind = {"used": "kept", "stale": "dropped stale"}.get(r.decision)
            if kind is not None:
                self.bias[kind].append((tokens, (self.ns(r.end) - self.ns(r.start)) / 1e9, r.reward))

    def _timing(self, p: StepPlan) -> dict:
        """Where each consumed sample's staleness came from: in flight (generating) or queued (waiting)."""
        ns, flight_s, queued_s, flight_v, stale = self.ns, [], [], [], []
        ends = [e for e, _ in self.step_ends]  # steps end in order, each producing the next version
        for r in p.rollouts:
            end = ns(r.end)
            i = bisect_right(ends, end)
            newest = self.step_ends[i - 1][1] if i else r.policy_version
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


def _truncation(p: StepPlan) -> dict:
    """The step's rollouts each limit cut off (docs/metrics.md, "Truncation"): its turn budget, else the
    response limit where its last turn's output reached its environment's output_max."""
    out = dict.fromkeys(("response", "context", "turns", "tools"), 0)
    t = p.turns
    for r in p.rollouts:
        first, n = r.turn_rows
        if r.turn_budget_cut and r.completed:
            out["turns"] += 1
        elif n and t.output_tokens[first + n - 1] >= r.env.output_max:
            out["response"] += 1
    out["rollouts"] = sum(1 for r in p.rollouts if r.turn_rows[1])
    return out


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


def content_digest(store: Path | str, run_id: str, *, ids: bool = True, dataset: str = "spans") -> str:
    """sha256 of the run's span rows (or ``dataset``'s: its messages) in canonical order, process ids and SDK
    versions left out.

    Two runs of the same seed and config give the same digest on any machine, with any number of workers,
    compacted or not. With ``ids=False`` span, trace and instance ids are left out too, so two runs of
    the same seed under different run ids (whose ids differ) compare equal.
    """
    table = _canonical_table(store, run_id, ids, dataset)
    digest = hashlib.sha256()
    for name in table.column_names:
        values = table.column(name).to_pylist()
        if name == "resource_attributes":
            values = [_stable_resource(v, ids) for v in values]
        digest.update(name.encode())
        digest.update(json.dumps(values, default=_bytes_hex, separators=(",", ":")).encode())
    return digest.hexdigest()


def _canonical_table(store: Path | str, run_id: str, ids: bool, dataset: str = "spans"):
    """All span (or message) rows of the run, columns by name, rows sorted by ids (or by every column without
    them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollscope.store.layout import segments
    from rollscope.store.schema import DATASETS

    tables = [pq.read_table(f) for f in segments(store, dataset, run_id)]
    table = pa.concat_tables(tables, promote_options="default") if tables else DATASETS[dataset].empty_table()
    if not ids:
        table = table.drop_columns([c for c in _ID_COLUMNS if c in table.column_names])
    table = table.select(sorted(table.column_names))
    keys = ["trace_id", "span_id"] + (["ordinal"] if dataset == "messages" else [])
    if not ids:
        keys = [n for n in table.column_names if n != "resource_attributes"]
    return table.sort_by([(k, "ascending") for k in keys])


def _stable_resource(text: str | None, ids: bool) -> str | None:
    if text is None:
        return None
    volatile = _VOLATILE_RESOURCE if ids else (*_VOLATILE_RESOURCE, "service.instance.id")
    attrs = json.loads(text)
    return json.dumps({k: v for k, v in sorted(attrs.items()) if k not in volatile})


def _bytes_hex(value):
    return value.hex() if isinstance(value, bytes) else str(value)
