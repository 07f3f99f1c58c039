"""The plan as spans: which simulated process emits what, with which attributes, ids and timestamps.

A step's spans (:class:`StepSpans`) come in two forms. Rollouts, turns, tool calls, scoring calls and
training samples are :class:`SpanTable` columns, built with array operations from the plan (most of them from
its turn and tool columns); the trainer's two spans per step and a silent worker's hung rollout are
records, plain tuples::

    (name, start_ns, end_ns, trace_id, span_id, parent_span_id | None, attributes, error | None)

Both carry the same fields: fast mode turns tables straight into Arrow columns, the normal mode turns every
table row into a record (``SpanTable.records``) and emits it through ``attach()``, so the two write the same
rows. Attribute names come from :mod:`rollscope.semconv` (looked up by their store column), so the
simulator speaks the same conventions a user's job does. Ids are drawn from a generator seeded by the run
id, seed and step: a rollout's spans share one trace even when a sandbox, a judge or a teacher emits them
from another process, as they would with trace-context propagation, and two runs of the same seed get the
same ids.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from rollscope import semconv
from rollscope.simulator import training, transcripts
from rollscope.simulator.config import SimConfig
from rollscope.simulator.plan import Rollout, StepPlan, TurnColumns
from rollscope.simulator.sampling import derive_seed

_ATTRIBUTE = {a.column: a.name for a in semconv.SPAN_ATTRIBUTES}
ROLLOUT_ID, TASK_ID, GROUP_ID, ENVIRONMENT = (
    _ATTRIBUTE["rollout_id"],
    _ATTRIBUTE["task_id"],
    _ATTRIBUTE["group_id"],
    _ATTRIBUTE["environment"],
)
POLICY_VERSION, STATUS, REWARD, ERROR = (
    _ATTRIBUTE["policy_version"],
    _ATTRIBUTE["rollout_status"],
    _ATTRIBUTE["reward"],
    _ATTRIBUTE["error_type"],
)
TURN_INDEX, INPUT, CACHED, OUTPUT = (
    _ATTRIBUTE["turn_index"],
    _ATTRIBUTE["input_tokens"],
    _ATTRIBUTE["cached_input_tokens"],
    _ATTRIBUTE["output_tokens"],
)
CONTEXT, PREFILL_S, DECODE_S, TTFT_S = (
    _ATTRIBUTE["context_tokens"],
    _ATTRIBUTE["prefill_time_s"],
    _ATTRIBUTE["decode_time_s"],
    _ATTRIBUTE["ttft_s"],
)
MODEL, OPERATION = _ATTRIBUTE["request_model"], _ATTRIBUTE["operation_name"]
DRAFT, ACCEPTED, VERIFY, SPEC_K = (
    _ATTRIBUTE["spec_draft_tokens"],
    _ATTRIBUTE["spec_accepted_tokens"],
    _ATTRIBUTE["spec_verify_steps"],
    _ATTRIBUTE["spec_k"],
)
DRAFTER, DRAFTER_PV, LOGPROBS = (
    _ATTRIBUTE["drafter_version"],
    _ATTRIBUTE["drafter_policy_version"],
    _ATTRIBUTE["logprobs_source"],
)
TOOL, SANDBOX, EXIT_CODE, OBSERVATION = (
    _ATTRIBUTE["tool_name"],
    _ATTRIBUTE["sandbox_id"],
    _ATTRIBUTE["tool_exit_code"],
    _ATTRIBUTE["observation_tokens"],
)
REWARD_NAME, JUDGE_STATUS, JUDGE_P = (
    _ATTRIBUTE["reward_name"],
    _ATTRIBUTE["judge_status"],
    _ATTRIBUTE["judge_model_parameters"],
)
TEACHER_P, TEACHER_TOKENS = _ATTRIBUTE["teacher_model_parameters"], _ATTRIBUTE["teacher_tokens"]
TRAIN_STEP, SAMPLES, TRAIN_TOKENS, WAIT, LOSS = (
    _ATTRIBUTE["train_step"],
    _ATTRIBUTE["train_samples"],
    _ATTRIBUTE["train_tokens"],
    _ATTRIBUTE["train_wait_s"],
    _ATTRIBUTE["train_loss"],
)
DECISION, STALENESS, SAMPLE_TOKENS = (
    _ATTRIBUTE["sample_decision"],
    _ATTRIBUTE["sample_staleness"],
    _ATTRIBUTE["sample_tokens"],
)
MISMATCH = tuple(
    _ATTRIBUTE[c] for c in ("mismatch_kl", "logprob_diff_mean", "logprob_diff_max", "importance_ratio_mean")
)


@dataclass(frozen=True)
class Instance:
    """One simulated process: it calls attach() once with this identity."""

    key: str  # e.g. "rollout-server-0"; service.instance.id is "<key>@<run id>"
    service_name: str
    role: str
    devices: float
    model_name: str | None
    model_parameters: int | None


@dataclass
class Strings:
    """A string column as codes into a few distinct values (``None`` for unset): a step's turns name a few
    hundred rollouts, so the column costs an int per row to send and one Arrow ``take`` to convert."""

    codes: np.ndarray
    values: list[str | None]

    def __len__(self) -> int:
        return len(self.codes)

    def decode(self) -> np.ndarray:
        """One value per row, as an object array."""
        return _objects(self.values)[self.codes]

    def present(self) -> np.ndarray:
        """Rows whose value is set."""
        return np.asarray([v is not None for v in self.values], dtype=bool)[self.codes]

    def counts(self) -> Counter:
        """Rows per value."""
        n = np.bincount(self.codes, minlength=len(self.values)).tolist()
        return Counter({v: c for v, c in zip(self.values, n, strict=True) if c})

    @classmethod
    def constant(cls, value: str | None, n: int) -> Strings:
        return cls(np.zeros(n, dtype=np.int32), [value])


@dataclass
class SpanTable:
    """Spans column-wise. ``process[key[i]]`` emits row i; ``trace_id`` holds each row's 128-bit trace id as
    two 64-bit halves (high, low); ``parent_span_id`` is 0 for a root span; ``attributes`` maps store
    columns to arrays (numbers) or
    :class:`Strings`, with ``valid`` masks for the numeric columns some rows leave unset."""

    process: list[str]
    key: np.ndarray
    name: Strings
    start_ns: np.ndarray
    end_ns: np.ndarray
    trace_id: np.ndarray
    span_id: np.ndarray
    parent_span_id: np.ndarray
    error: Strings
    attributes: dict[str, np.ndarray | Strings]
    valid: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.key)

    def counts(self) -> Counter:
        """Spans per process key."""
        n = np.bincount(self.key, minlength=len(self.process))
        return Counter({p: int(c) for p, c in zip(self.process, n.tolist(), strict=True) if c})

    def _valid(self, column: str) -> list[bool] | None:
        """Which rows set this column (None: all)."""
        if column in self.valid:
            return self.valid[column].tolist()
        values = self.attributes[column]
        return values.present().tolist() if isinstance(values, Strings) else None

    def records(self) -> dict[str, list[tuple]]:
        """The rows as records by process (the normal mode emits them through ``attach()``)."""
        names = [_ATTRIBUTE[c] for c in self.attributes]
        values = [_values(v).tolist() for v in self.attributes.values()]
        valid = [self._valid(c) for c in self.attributes]
        trace = ((self.trace_id[:, 0].astype(object) << 64) | self.trace_id[:, 1].astype(object)).tolist()
        out: dict[str, list[tuple]] = {}
        rows = zip(
            self.key.tolist(),
            self.name.decode().tolist(),
            self.start_ns.tolist(),
            self.end_ns.tolist(),
            trace,
            self.span_id.tolist(),
            self.parent_span_id.tolist(),
            self.error.decode().tolist(),
            strict=True,
        )
        for i, (key, name, start, end, trace_id, span_id, parent, error) in enumerate(rows):
            attrs = {n: v[i] for n, v, ok in zip(names, values, valid, strict=True) if ok is None or ok[i]}
            record = (name, start, end, trace_id, span_id, parent or None, attrs, error)
            out.setdefault(self.process[key], []).append(record)
        return out


@dataclass
class StepSpans:
    """A step's spans: tables (turns, tool calls) and records (the rest), by the process that emits them; and
    what their turns, tool calls and judges said (``messages``, none when the run writes no transcripts), with
    each rollout's transcript flags (``flags``: the ground truth, ``simulator.transcripts``)."""

    records: dict[str, list[tuple]]
    tables: list[SpanTable]
    messages: transcripts.Messages | None = None
    flags: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return sum(len(r) for r in self.records.values()) + sum(len(t) for t in self.tables)

    def counts(self) -> Counter:
        """Spans per process key."""
        out = Counter({key: len(recs) for key, recs in self.records.items()})
        for table in self.tables:
            out.update(table.counts())
        return out

    def all_records(self) -> dict[str, list[tuple]]:
        """Every span as a record, by process."""
        out = {key: list(recs) for key, recs in self.records.items()}
        for table in self.tables:
            for key, recs in table.records().items():
                out.setdefault(key, []).extend(recs)
        return out

    def content(self) -> dict[str, dict[int, dict]]:
        """The content arguments of each span that has any, by process and span id (the normal mode sets
        them through the helpers: ``span.set(output=...)``)."""
        return transcripts.helper_arguments(self.messages) if self.messages is not None else {}


def instances(c: SimConfig) -> list[Instance]:
    """The run's processes: rollout servers, the trainer, judges, teachers, sandbox hosts."""
    out = []
    for kind, service, role in (
        ("rollout", "rollout-server", "rollout"),
        ("trainer", "trainer", "train"),
        ("judge", "judge", "judge"),
        ("teacher", "teacher", "teacher"),
        ("sandbox", "sandbox", "env"),
    ):
        p = getattr(c, kind)
        for i in range(p.count):
            model = (p.model_name, p.model_parameters) if role != "env" else (None, None)
            out.append(Instance(f"{service}-{i}", service, role, float(p.devices), *model))
    return out


def base_ns(c: SimConfig) -> int:
    moment = datetime.fromisoformat(c.base_time.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000


class SpanBuilder:
    """Turns each step's plan into spans, grouped by the instance that emits them."""

    def __init__(self, config: SimConfig, run_id: str):
        self.c = config
        self.base = base_ns(config)
        self._seed = derive_seed(run_id, config.seed, "ids")
        self.policy_model = config.rollout.model_name
        self._hung_ids: dict[str, tuple[int, int, int]] = {}

    def ns(self, t: float) -> int:
        return self.base + round(t * 1e9)

    def ns_array(self, t: np.ndarray) -> np.ndarray:
        """:meth:`ns` for an array of times."""
        return self.base + np.rint(t * 1e9).astype(np.int64)

    def _span_id(self) -> int:
        return next(self._ids)

    def _trace_id(self) -> tuple[int, int]:
        return next(self._traces)

    def step(self, plan: StepPlan) -> StepSpans:
        ids = np.random.default_rng((self._seed, plan.step))
        R = len(plan.rollouts)
        traces = _random_ids(ids, (R + 4, 2))
        roots = _random_ids(ids, R)
        self._traces = iter(traces[R:].tolist())
        self._ids = iter(_random_ids(ids, 8).tolist())
        out: dict[str, list[tuple]] = {}
        trainer = self._trainer(plan, out)
        turns = self._turns(plan.rollouts, plan.turns, ids, traces[:R], roots)
        tools = self._tools(plan, ids, traces[:R], roots)
        scorings = self._scorings(plan.rollouts, ids, traces[:R], roots)
        tables = [self._rollouts(plan.rollouts, traces[:R], roots), turns, tools, scorings]
        if self.c.emit_samples:
            tables.append(self._samples(plan, ids, *trainer))
        for r in plan.hung_started:
            tables.append(self._hung_turn(r, ids))
        for r in plan.hung_ended:
            self._hung_end(r, out)
        said = transcripts.plan(self.c, plan, turns, tools, scorings) if self.c.transcripts.enabled else None
        return StepSpans(out, [t for t in tables if len(t)], *(said or (None, None)))

    # --- a silent worker's hung rollout (simulator/health.py) -------------------------------------------------

    def _hung_turn(self, r: Rollout, ids: np.random.Generator) -> SpanTable:
        hi, lo = self._trace_id()
        root = self._span_id()
        self._hung_ids[r.rollout_id] = (hi, lo, root)
        trace = np.asarray([[hi, lo]], dtype=np.uint64)
        return self._turns([r], r.turn_columns, ids, trace, np.asarray([root], dtype=np.uint64))

    def _hung_end(self, r: Rollout, out: dict) -> None:
        hi, lo, root = self._hung_ids[r.rollout_id]
        attrs = {
            ROLLOUT_ID: r.rollout_id,
            TASK_ID: r.task_id,
            ENVIRONMENT: r.env.name,
            POLICY_VERSION: r.policy_version,
            STATUS: r.status,
            ERROR: "worker_lost",
        }
        trace = (hi << 64) | lo
        record = ("rl.rollout", self.ns(r.start), self.ns(r.end), trace, root, None, attrs, "worker_lost")
        out.setdefault(f"rollout-server-{r.server}", []).append(record)

    # --- rollouts -------------------------------------------------------------------------------------------

    def _rollouts(self, rollouts: list[Rollout], traces, roots) -> SpanTable:
        """Every rollout: an ``rl.rollout`` root span on its server, from dispatch to its last call."""
        R = len(rollouts)
        everyone = np.arange(R)
        times = np.asarray([(r.start, r.end) for r in rollouts], dtype=float).reshape(-1, 2)
        numbers = np.asarray([(r.server, r.policy_version) for r in rollouts], dtype=np.int64).reshape(-1, 2)
        reward = np.asarray([np.nan if r.reward is None else r.reward for r in rollouts], dtype=float)
        error = _factorize([None if r.completed else _failure(r) for r in rollouts])
        attributes = {
            "rollout_id": Strings(everyone, [r.rollout_id for r in rollouts]),
            "task_id": Strings(everyone, [r.task_id for r in rollouts]),
            "group_id": Strings(everyone, [r.group_id for r in rollouts]),
            "environment": _factorize([r.env.name for r in rollouts]),
            "policy_version": numbers[:, 1],
            "task_prompt_tokens": np.asarray([r.prompt for r in rollouts], dtype=np.int64),
            "rollout_status": _factorize([r.status for r in rollouts]),
            "reward": reward,
            "error_type": error,
            # a rollout that ran all its turns and would have taken more: its turn budget stopped it
            "truncation_limit": _factorize(
                ["turns" if r.turn_budget_cut and r.completed else None for r in rollouts]
            ),
        }
        return SpanTable(
            [f"rollout-server-{i}" for i in range(self.c.rollout.count)],
            numbers[:, 0],
            Strings.constant("rl.rollout", R),
            self.ns_array(times[:, 0]),
            self.ns_array(times[:, 1]),
            traces,
            roots,
            np.zeros(R, dtype=np.uint64),
            error,
            attributes,
            {"reward": ~np.isnan(reward)},
        )

    def _scorings(self, rollouts: list[Rollout], ids, traces, roots) -> SpanTable:
        """Every verifier, judge and teacher call: a span on its sandbox host, judge or teacher, under the
        rollout's root."""
        c = self.c
        kinds = ("reward", "judge", "teacher")
        first = np.cumsum([0, c.sandbox.count, c.judge.count])
        rows = [(i, r, s) for i, r in enumerate(rollouts) for s in r.scorings]
        n = len(rows)
        owner = np.asarray([i for i, _, _ in rows], dtype=np.int64)
        kind = np.asarray([kinds.index(s.kind) for _, _, s in rows], dtype=np.int64)
        numbers = np.asarray(
            [(s.instance, s.input_tokens, s.output_tokens, s.tokens) for _, _, s in rows], dtype=np.int64
        ).reshape(-1, 4)
        times = np.asarray([(s.start, s.end) for _, _, s in rows], dtype=float).reshape(-1, 2)
        reward = np.asarray([np.nan if s.reward is None else s.reward for _, _, s in rows], dtype=float)
        judge, teacher = kind == 1, kind == 2
        error = _factorize([s.error for _, _, s in rows])
        attributes = {
            "rollout_id": Strings(owner, [r.rollout_id for r in rollouts]),
            "reward_name": _factorize(
                [(s.name or r.env.reward_name) if s.kind == "reward" else None for _, r, s in rows]
            ),
            "input_tokens": numbers[:, 1],
            "output_tokens": numbers[:, 2],
            "judge_status": _factorize([s.status if s.kind == "judge" else None for _, _, s in rows]),
            "request_model": Strings(kind, [None, c.judge.model_name, c.teacher.model_name]),
            "judge_model_parameters": np.full(n, c.judge.model_parameters, dtype=np.int64),
            "teacher_tokens": numbers[:, 3],
            "teacher_model_parameters": np.full(n, c.teacher.model_parameters, dtype=np.int64),
            "reward": reward,
            "error_type": error,
        }
        valid = {
            "input_tokens": judge,
            "output_tokens": judge,
            "judge_model_parameters": judge,
            "teacher_tokens": teacher,
            "teacher_model_parameters": teacher,
            "reward": ~np.isnan(reward),
        }
        processes = [f"{p}-{i}" for p in ("sandbox", "judge", "teacher") for i in range(getattr(c, p).count)]
        return self._under_roots(
            processes,
            first[kind] + numbers[:, 0],
            Strings(kind, ["rl.reward", "rl.judge", "rl.teacher"]),
            (times[:, 0], times[:, 1]),
            owner,
            (ids, traces, roots),
            error,
            attributes,
            valid,
        )

    def _samples(self, p: StepPlan, ids, trace: int, root: int) -> SpanTable:
        """The trainer's decision on each training sample of the step: an ``rl.sample`` span when the data is
        ready, one per rollout, or one per sample (``rl.sample.id``) of a rollout compaction made several; the
        train-inference mismatch is measured on a rollout's first sample."""
        counts = np.asarray([max(1, len(r.sample_tokens)) for r in p.rollouts], dtype=np.int64)
        owner = np.repeat(np.arange(len(p.rollouts)), counts)
        R = len(owner)
        nth = np.arange(R) - np.repeat(np.cumsum(counts) - counts, counts)  # which sample of its rollout
        rollouts = [p.rollouts[i] for i in owner.tolist()]
        mismatch = np.asarray(
            [
                r.mismatch if r.mismatch is not None and n == 0 else (np.nan,) * 4
                for r, n in zip(rollouts, nth.tolist(), strict=True)
            ],
            dtype=float,
        ).reshape(-1, 4)
        used = np.asarray([r.decision == "used" for r in rollouts], dtype=bool)
        measured = ~np.isnan(mismatch[:, 0])
        tokens = [
            r.sample_tokens[n] if r.sample_tokens else r.trajectory_tokens
            for r, n in zip(rollouts, nth.tolist(), strict=True)
        ]
        named = counts[owner] > 1
        attributes = {
            "rollout_id": Strings(owner, [r.rollout_id for r in p.rollouts]),
            "sample_id": _sample_ids(
                named, [r.rollout_id for r, many in zip(rollouts, named, strict=True) if many], nth
            ),
            "train_step": np.full(R, p.step, dtype=np.int64),
            "sample_decision": _factorize([r.decision for r in rollouts]),
            "sample_staleness": np.asarray([r.staleness for r in rollouts], dtype=np.int64),
            "sample_tokens": np.asarray(tokens, dtype=np.int64),
        }
        valid = {"sample_tokens": used}
        for i, column in enumerate(
            ("mismatch_kl", "logprob_diff_mean", "logprob_diff_max", "importance_ratio_mean")
        ):
            attributes[column] = mismatch[:, i]
            valid[column] = measured
        ready = np.full(R, self.ns(p.ready), dtype=np.int64)
        return SpanTable(
            ["trainer-0"],
            np.zeros(R, dtype=np.int64),
            Strings.constant("rl.sample", R),
            ready,
            ready,
            np.tile(np.asarray([trace >> 64, trace & (2**64 - 1)], dtype=np.uint64), (R, 1)),
            _random_ids(ids, R),
            np.full(R, root, dtype=np.uint64),
            Strings.constant(None, R),
            attributes,
            valid,
        )

    def _turns(self, rollouts: list[Rollout], t: TurnColumns, ids, traces, roots) -> SpanTable:
        """Every turn of these rollouts: an ``rl.turn`` span on the rollout's server, under its root."""
        owner = t.rollout
        n, R = len(owner), len(rollouts)
        process = [f"rollout-server-{i}" for i in range(self.c.rollout.count)]
        numbers = np.asarray(
            [(r.server, r.policy_version, r.drafter_policy_version or 0) for r in rollouts], dtype=np.int64
        ).reshape(-1, 3)[owner]
        spec = t.spec_k > 0
        error = Strings(t.error, list(TurnColumns.ERRORS))
        compacted = t.compact_before > 0
        limit = np.asarray([r.env.output_max for r in rollouts], dtype=np.int64).reshape(-1)[owner]
        attributes = {
            "rollout_id": Strings(owner, [r.rollout_id for r in rollouts]),
            "turn_index": t.index,
            "policy_version": numbers[:, 1],
            "input_tokens": t.input_tokens,
            "cached_input_tokens": t.cached_input_tokens,
            "output_tokens": t.output_tokens,
            "context_tokens": t.context_tokens,
            "prefix_tokens": t.prefix,
            "continuity_break": Strings(t.continuity, list(TurnColumns.BREAKS)),
            "compaction_tokens_before": t.compact_before,
            "compaction_tokens_after": t.compact_after,
            "sample_id": _sample_ids(compacted, [rollouts[o].rollout_id for o in owner[compacted]], t.sample),
            "prefill_time_s": np.round(t.prefill_s, 6),
            "decode_time_s": np.round(t.decode_s, 6),
            "ttft_s": np.round(t.ttft_s, 6),
            "request_model": Strings.constant(self.policy_model, n),
            "logprobs_source": Strings(t.drafter.astype(np.int32), ["policy", "drafter"]),
            "spec_draft_tokens": t.draft_tokens,
            "spec_accepted_tokens": t.accepted_tokens,
            "spec_verify_steps": t.verify_steps,
            "spec_k": t.spec_k,
            "drafter_version": Strings(
                np.where(spec, owner, R), [*(r.drafter_version for r in rollouts), None]
            ),
            "drafter_policy_version": numbers[:, 2],
            "error_type": error,
            # the response limit each generation asked for, the servers' context length, and the turns the
            # response limit cut off (their output reached it)
            "max_tokens": limit,
            "context_length": np.full(n, self.c.context_length, dtype=np.int64),
            "truncation_limit": Strings((t.output_tokens >= limit).astype(np.int32), [None, "response"]),
        }
        valid = {
            c: spec for c in ("spec_draft_tokens", "spec_accepted_tokens", "spec_verify_steps", "spec_k")
        }
        valid["drafter_policy_version"] = spec
        valid["prefix_tokens"] = t.index > 0
        valid["compaction_tokens_before"] = valid["compaction_tokens_after"] = compacted
        if self.c.environment_on_turns:
            attributes["environment"] = Strings(owner, [r.env.name for r in rollouts])
        return self._under_roots(
            process,
            numbers[:, 0],
            Strings.constant("rl.turn", n),
            (t.start, t.end),
            owner,
            (ids, traces, roots),
            error,
            attributes,
            valid,
        )

    def _tools(self, plan: StepPlan, ids, traces, roots) -> SpanTable:
        """Every tool call: an ``execute_tool`` span on the rollout's sandbox host, under its root."""
        t = plan.tools
        owner = t.rollout
        n = len(owner)
        process = [f"sandbox-{i}" for i in range(self.c.sandbox.count)]
        sandbox = np.asarray([r.sandbox for r in plan.rollouts], dtype=np.int64)
        error = Strings(t.lost.astype(np.int32), [None, "sandbox_lost"])
        attributes = {
            "rollout_id": Strings(owner, [r.rollout_id for r in plan.rollouts]),
            "tool_name": Strings(t.tool, t.names),
            "operation_name": Strings.constant("execute_tool", n),
            "sandbox_id": Strings(owner, [f"sbx-{r.rollout_id}" for r in plan.rollouts]),
            "tool_exit_code": t.exit_code,
            "observation_tokens": t.observation_tokens,
            "error_type": error,
        }
        return self._under_roots(
            process,
            sandbox[owner],
            Strings(t.tool, [f"execute_tool {name}" for name in t.names]),
            (t.start, t.end),
            owner,
            (ids, traces, roots),
            error,
            attributes,
        )

    def _under_roots(self, process, key, name, times, owner, ids, error, attributes, valid=None) -> SpanTable:
        """Spans under their rollouts' root spans: row i belongs to rollout ``owner[i]`` (its trace and parent);
        ``times`` is (start, end) in simulated seconds; ``ids`` is (the id generator, the rollouts' traces,
        their root span ids)."""
        generator, traces, roots = ids
        return SpanTable(
            process,
            key,
            name,
            self.ns_array(times[0]),
            self.ns_array(times[1]),
            traces[owner],
            _random_ids(generator, len(owner)),
            roots[owner],
            error,
            attributes,
            valid or {},
        )

    # --- trainer --------------------------------------------------------------------------------------------

    def _trainer(self, p: StepPlan, out: dict) -> tuple[int, int]:
        """The step's ``rl.train_step`` and ``rl.weight_sync`` records; returns the step's trace and root span
        (its ``rl.sample`` spans go under it)."""
        trainer = out.setdefault("trainer-0", [])
        hi, lo = self._trace_id()
        trace, root = (hi << 64) | lo, self._span_id()
        start, ready = self.ns(p.start), self.ns(p.ready)
        attrs = {
            TRAIN_STEP: p.step,
            POLICY_VERSION: p.policy_version,
            SAMPLES: p.train_samples,
            TRAIN_TOKENS: p.train_tokens,
            WAIT: (ready - start) / 1e9,
            LOSS: self._loss(p),
            **{
                _ATTRIBUTE[column]: value
                for column, value in training.signals(self.c, p.step, p.index).items()
            },
        }
        trainer.append(("rl.train_step", start, self.ns(p.end), trace, root, None, attrs, None))
        sync = {POLICY_VERSION: p.policy_version}
        hi, lo = self._trace_id()
        trainer.append(
            (
                "rl.weight_sync",
                self.ns(p.end),
                self.ns(p.sync_end),
                (hi << 64) | lo,
                self._span_id(),
                None,
                sync,
                None,
            )
        )
        return trace, root

    def _loss(self, p: StepPlan) -> float:
        return train_loss(self.c, p)


def train_loss(c: SimConfig, p: StepPlan) -> float:
    """A plausible, slowly falling policy loss (the Learning page charts it; the ground truth keeps it)."""
    noise = random.Random(derive_seed(c.seed, "loss", p.step)).gauss(0, 0.02)
    return round(0.35 / (1 + 0.01 * p.index) + noise, 5)


def _failure(r: Rollout) -> str:
    """What a failed rollout's span reports: its lost sandbox's or its last turn's error."""
    if r.fail_in_tool:
        return "sandbox_lost"
    first, n = r.turn_rows
    return TurnColumns.ERRORS[int(r.turn_columns.error[first + n - 1])]


def _random_ids(ids: np.random.Generator, shape) -> np.ndarray:
    """Random nonzero 64-bit ids (the low bit set, as before: a span or trace id of 0 is invalid)."""
    return ids.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True) | np.uint64(1)


def _objects(values) -> np.ndarray:
    """An object array of these values (strings, None), for fancy indexing by row."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _values(column: np.ndarray | Strings) -> np.ndarray:
    return column.decode() if isinstance(column, Strings) else column


def _sample_ids(named: np.ndarray, rollout_ids: list[str], nth: np.ndarray) -> Strings:
    """``<rollout id>/<n>`` on the rows ``named`` (a sample of a rollout compaction made several: ``rollout_ids``
    are those rows' rollouts, ``nth`` every row's sample number), unset elsewhere."""
    rows = np.flatnonzero(named)
    codes = np.zeros(len(named), dtype=np.int64)
    codes[rows] = np.arange(1, len(rows) + 1)
    ids = [f"{rollout}/{n}" for rollout, n in zip(rollout_ids, nth[rows].tolist(), strict=True)]
    return Strings(codes, [None, *ids])


def _factorize(values: list[str | None]) -> Strings:
    """A string column of a few distinct values, as codes."""
    index: dict[str | None, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values))
    return Strings(codes, list(index))
