"""Ground truth of "is it stuck" (docs/metrics.md, "Health" and "Goodput"), from the records the run emits.

The figures follow the definitions of ``queries/sql/analyses/macros/08_health.sql`` but are computed here from
the simulator's own records and plan, never from the store: liveness per process, scoring latency per
consuming step, the trainer's and the rollout fleet's time per step window, and device-seconds spent on
rollouts that were never used. ``Truth`` feeds it every step and writes its document under ``health``.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rollscope import semconv
from rollscope.simulator.config import SimConfig
from rollscope.simulator.plan import StepPlan
from rollscope.simulator.records import (
    JUDGE_STATUS,
    ROLLOUT_ID,
    STATUS,
    WAIT,
    Instance,
    SpanTable,
    StepSpans,
)

STATES = ("generating", "weights_wait", "tools_wait", "idle")
MAX_INTERVALS = 2_000_000  # beyond this (scale mode) the fleet's states are not kept: null in the truth


class Health:
    """Accumulates what the health figures need, step by step."""

    def __init__(self, c: SimConfig, procs: list[Instance], run_id: str):
        self.c, self.run_id = c, run_id
        self.devices = {p.key: p.devices for p in procs}
        self.last_end: dict[str, int] = {}
        self.scoring: dict[tuple[int, str], list[tuple[float, bool]]] = defaultdict(list)
        self.train: list[tuple[int, int, int, float]] = []  # step, start, end, wait_s
        self.syncs: list[tuple[int, int]] = []
        # key -> chunks of (starts, ends, is_turn) arrays
        self.work: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = defaultdict(list)
        self.turn_s: dict[tuple[str, str], int] = defaultdict(int)  # (rollout, key) -> ns
        self.rollouts: dict[str, tuple[int | None, str, bool]] = {}  # rollout -> (step, status, usable)
        self.intervals = 0
        self.silent: dict | None = None

    def add_step(self, plan: StepPlan, spans: StepSpans) -> None:
        for r in plan.rollouts:
            self.rollouts[r.rollout_id] = (r.step, r.status, r.decision == "used")
        for r in plan.hung_ended:
            self.rollouts[r.rollout_id] = (None, r.status, False)
        for key, recs in spans.records.items():
            for name, start, end, _, _, _, attrs, _ in recs:
                self.last_end[key] = max(self.last_end.get(key, end), end)
                self._record(key, name, start, end, attrs, plan.step)
        for table in spans.tables:
            self._table(table, plan.step)

    def _table(self, t: SpanTable, step: int) -> None:
        """A table's spans, as :meth:`_record` counts records: each process's last end; turns and rollouts
        are work intervals (turn time counted per rollout); verifier and judge calls are scoring calls."""
        names = t.name.values
        turns = np.asarray([n == "rl.turn" for n in names], dtype=bool)[t.name.codes]
        work = turns | np.asarray([n == "rl.rollout" for n in names], dtype=bool)[t.name.codes]
        for kind, name in (("verifier", "rl.reward"), ("judge", "rl.judge")):
            calls = np.asarray([n == name for n in names], dtype=bool)[t.name.codes]
            if calls.any():
                seconds = (t.end_ns[calls] - t.start_ns[calls]) / 1e9
                status = t.attributes.get("judge_status")
                timeouts = (
                    np.asarray([v == "timeout" for v in status.values], dtype=bool)[status.codes[calls]]
                    if status is not None
                    else np.zeros(len(seconds), dtype=bool)
                )
                self.scoring[(step, kind)].extend(zip(seconds.tolist(), timeouts.tolist(), strict=True))
        for k in np.unique(t.key).tolist():
            mine = t.key == k
            key = t.process[k]
            end = int(t.end_ns[mine].max())
            self.last_end[key] = max(self.last_end.get(key, end), end)
            rows = mine & work
            n = int(rows.sum())
            if not n:
                continue
            self.intervals += n
            if self.intervals <= MAX_INTERVALS:
                self.work[key].append((t.start_ns[rows], t.end_ns[rows], turns[rows]))
            rows &= turns
            if not rows.any():
                continue
            ids = t.attributes["rollout_id"]
            rollout = ids.codes[rows]
            head = np.flatnonzero(np.concatenate(([True], rollout[1:] != rollout[:-1])))
            seconds = np.add.reduceat(t.end_ns[rows] - t.start_ns[rows], head)
            for code, ns in zip(rollout[head].tolist(), seconds.tolist(), strict=True):
                self.turn_s[(ids.values[code], key)] += ns

    def _record(self, key: str, name: str, start: int, end: int, attrs: dict, step: int) -> None:
        if name in ("rl.reward", "rl.judge"):
            kind = "judge" if name == "rl.judge" else "verifier"
            self.scoring[(step, kind)].append(((end - start) / 1e9, attrs.get(JUDGE_STATUS) == "timeout"))
        elif name == "rl.train_step":
            self.train.append((step, start, end, attrs[WAIT]))
        elif name == "rl.weight_sync":
            self.syncs.append((start, end))
        elif name in ("rl.turn", "rl.rollout"):
            self.intervals += 1
            if self.intervals <= MAX_INTERVALS:
                self.work[key].append(([start], [end], [name == "rl.turn"]))
            if name == "rl.turn":
                self.turn_s[(attrs[ROLLOUT_ID], key)] += end - start
            else:
                self.rollouts.setdefault(attrs[ROLLOUT_ID], (None, attrs[STATUS], False))

    # --- the document -----------------------------------------------------------------------------------------

    def document(self, silent_window: tuple[int, float, float] | None, ns) -> dict:
        as_of = max(self.last_end.values(), default=0)
        windows = self._windows()
        fleet = self._fleet(windows) if self.intervals <= MAX_INTERVALS else None
        wasted = self._wasted(fleet) if fleet is not None else None
        steps = sorted({w[0] for w in windows} | {s for s, _ in self.scoring})
        return {
            "as_of_ns": as_of,
            "processes": {
                f"{key}@{self.run_id}": {"last_end_ns": end, "silent_s": (as_of - end) / 1e9}
                for key, end in sorted(self.last_end.items())
            },
            "silent_worker": self._silent(silent_window, ns),
            "scoring": {kind: self._scoring(None, kind) for kind in ("verifier", "judge")},
            "trainer": _sum([_trainer_row(w) for w in windows]),
            "rollout": _sum(list(fleet.values())) if fleet is not None else None,
            "wasted": _sum(list(wasted.values())) if wasted is not None else None,
            "by_step": [self._step(s, windows, fleet, wasted) for s in steps],
        }

    def _silent(self, window, ns) -> dict | None:
        if window is None:
            return None
        k, lo, hi = window
        return {
            "instance_id": f"rollout-server-{k}@{self.run_id}",
            "from_ns": ns(lo),
            "to_ns": ns(hi),
            "hung_rollout_id": f"hung-{k}",
        }

    def _step(self, s: int, windows, fleet, wasted) -> dict:
        window = next((w for w in windows if w[0] == s), None)
        return {
            "train_step": s,
            "scoring": {kind: self._scoring(s, kind) for kind in ("verifier", "judge")},
            "trainer": _trainer_row(window) if window else None,
            "rollout": fleet.get(s) if fleet is not None else None,
            "wasted": wasted.get(s) if wasted is not None else None,
        }

    def _scoring(self, step: int | None, kind: str) -> dict:
        calls = [c for (s, k), cs in self.scoring.items() if k == kind and step in (None, s) for c in cs]
        seconds = np.asarray([d for d, _ in calls], dtype=float)
        q = np.quantile(seconds, [0.5, 0.99]) if len(seconds) else [None, None]
        return {
            "calls": len(calls),
            "p50_s": None if q[0] is None else float(q[0]),
            "p99_s": None if q[1] is None else float(q[1]),
            "timeouts": sum(t for _, t in calls),
        }

    def _windows(self) -> list[tuple[int, int, int, float, int, int]]:
        """(step, start, end, wait_s, window_end, sync_ns) as _step_windows defines them."""
        train = sorted(self.train, key=lambda t: t[1])
        out = []
        for i, (step, start, end, wait) in enumerate(train):
            nxt = train[i + 1][1] if i + 1 < len(train) else None
            mine = [(a, b) for a, b in self.syncs if a >= end and (nxt is None or a < nxt)]
            sync_ns = sum(min(b, nxt if nxt is not None else b) - max(a, end) for a, b in mine)
            window_end = nxt if nxt is not None else max([end, *(b for _, b in mine)])
            out.append((step, start, end, wait, window_end, sync_ns))
        return out

    def _fleet(self, windows) -> dict:
        """Per step (None: outside every window): the rollout processes' device-seconds in each state."""
        out: dict = defaultdict(lambda: dict.fromkeys(_fleet_keys(), 0.0))
        self.generating: dict[str, float] = {}
        steps = [w[0] for w in windows] + [None]
        for key, chunks in self.work.items():
            starts, ends, turns = (np.concatenate([np.asarray(c[i]) for c in chunks]) for i in range(3))
            if not turns.any():
                continue
            window, state, seconds = _states(starts, ends, turns.astype(bool), self.syncs, windows)
            device_s = np.bincount(window * len(STATES) + state, weights=seconds * self.devices[key])
            for i, value in enumerate(device_s.tolist()):
                if value:
                    step, st = steps[i // len(STATES)], STATES[i % len(STATES)]
                    out[step][f"{st}_device_s"] += value
                    if st == "generating":
                        self.generating[key] = self.generating.get(key, 0.0) + value
        return dict(out)

    def _wasted(self, fleet) -> dict:
        totals: dict[str, int] = defaultdict(int)
        for (_, key), t in self.turn_s.items():
            totals[key] += t
        per_rollout: dict[str, float] = defaultdict(float)
        for (rollout, key), t in self.turn_s.items():
            per_rollout[rollout] += t / totals[key] * self.generating.get(key, 0.0)
        out: dict = defaultdict(lambda: dict.fromkeys(_wasted_keys(), 0.0))
        for rollout, device_s in per_rollout.items():
            if rollout not in self.rollouts:
                continue
            step, status, usable = self.rollouts[rollout]
            row = out[step]
            row["total_device_s"] += device_s
            if status in (semconv.ROLLOUT_INFRA_ERROR, semconv.ROLLOUT_ABORTED):
                row[f"{status}_device_s"] += device_s
            elif not usable:
                row["unused_device_s"] += device_s
        return dict(out)


def _states(starts, ends, turns, syncs, windows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One process's time from its first to its last turn or rollout span, cut where anything starts or
    ends: each piece's step window (``len(windows)``: outside every window), state (index in ``STATES``:
    generating while a turn runs, else waiting for weights while a sync runs, else waiting on tools while a
    rollout is open, else idle) and seconds. A sweep over the sorted change points, in arrays."""
    sync = np.asarray(syncs, dtype=np.int64).reshape(-1, 2)
    bounds = np.asarray([(w[1], w[4]) for w in windows], dtype=np.int64).reshape(-1, 2)
    kind = np.where(turns, 0, 1)
    times = np.concatenate([starts, ends, sync[:, 0], sync[:, 1], bounds[:, 0], bounds[:, 1]])
    column = np.concatenate([kind, kind, np.full(2 * len(sync), 2), np.zeros(2 * len(bounds), np.int64)])
    delta = np.concatenate(
        [
            np.ones(len(starts), np.int64),
            -np.ones(len(ends), np.int64),
            np.ones(len(sync), np.int64),
            -np.ones(len(sync), np.int64),
            np.zeros(2 * len(bounds), np.int64),
        ]
    )
    ts, at = np.unique(times, return_inverse=True)
    deltas = np.zeros((len(ts), 3), dtype=np.int64)
    np.add.at(deltas, (at, column), delta)
    counts = np.cumsum(deltas, axis=0)[:-1]
    t, seconds = ts[:-1], np.diff(ts) / 1e9
    inside = (t >= starts.min()) & (t < ends.max())
    t, seconds, counts = t[inside], seconds[inside], counts[inside]
    gen, fly, syncing = counts[:, 0], counts[:, 1], counts[:, 2]
    state = np.where(gen > 0, 0, np.where(syncing > 0, 1, np.where(fly > 0, 2, 3)))
    j = np.searchsorted(bounds[:, 0], t, side="right") - 1
    in_window = (j >= 0) & (t < bounds[np.maximum(j, 0), 1]) if len(bounds) else np.zeros(len(t), bool)
    window = np.where(in_window, j, len(bounds))
    return window, state, seconds


def _trainer_row(w) -> dict:
    step, start, end, wait, window_end, sync_ns = w
    return {
        "window_s": (window_end - start) / 1e9,
        "computing_s": (end - start) / 1e9 - wait,
        "data_wait_s": wait,
        "sync_wait_s": sync_ns / 1e9,
    }


def _fleet_keys() -> list[str]:
    return [f"{s}_device_s" for s in STATES]


def _wasted_keys() -> list[str]:
    return ["infra_error_device_s", "aborted_device_s", "unused_device_s", "total_device_s"]


def _sum(rows: list[dict]) -> dict:
    keys = rows[0].keys() if rows else ()
    return {k: sum(r[k] for r in rows) for k in keys}
