"""The plan as spans: which simulated process emits what, with which attributes, ids and timestamps.

A record is a plain tuple, cheap to send to a worker process::

    (name, start_ns, end_ns, trace_id, span_id, parent_span_id | None, attributes, error | None)

Attribute names come from :mod:`collectors.semconv` (looked up by their store column), so the simulator
speaks the same conventions a user's job does. Ids are drawn from a generator seeded by the run id and seed:
a rollout's spans share one trace even when a sandbox, a judge or a teacher emits them from another process,
as they would with trace-context propagation, and two runs of the same seed get the same ids.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from rollscope.collectors import semconv
from rollscope.simulator.config import SimConfig
from rollscope.simulator.plan import Rollout, StepPlan
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
    """Turns each step's plan into records, grouped by the instance that emits them."""

    def __init__(self, config: SimConfig, run_id: str):
        self.c = config
        self.base = base_ns(config)
        self._ids = random.Random(derive_seed(run_id, config.seed, "ids"))
        self.policy_model = config.rollout.model_name

    def ns(self, t: float) -> int:
        return self.base + round(t * 1e9)

    def _span_id(self) -> int:
        return self._ids.getrandbits(64) | 1

    def step(self, plan: StepPlan) -> dict[str, list[tuple]]:
        out: dict[str, list[tuple]] = {}
        for r in plan.rollouts:
            self._rollout(r, out)
        self._trainer(plan, out)
        for r in plan.hung_started:
            self._hung_turn(r, out)
        for r in plan.hung_ended:
            self._hung_end(r, out)
        return out

    # --- a silent worker's hung rollout (simulator/health.py) -------------------------------------------------

    def _hung_turn(self, r: Rollout, out: dict) -> None:
        self._hung_ids = {r.rollout_id: (self._ids.getrandbits(128) | 1, self._span_id())}
        trace, root = self._hung_ids[r.rollout_id]
        out.setdefault(f"rollout-server-{r.server}", []).append(self._turn(r, r.turns[0], trace, root))

    def _hung_end(self, r: Rollout, out: dict) -> None:
        trace, root = self._hung_ids[r.rollout_id]
        attrs = {
            ROLLOUT_ID: r.rollout_id,
            TASK_ID: r.task_id,
            ENVIRONMENT: r.env.name,
            POLICY_VERSION: r.policy_version,
            STATUS: r.status,
            ERROR: "worker_lost",
        }
        record = ("rl.rollout", self.ns(r.start), self.ns(r.end), trace, root, None, attrs, "worker_lost")
        out.setdefault(f"rollout-server-{r.server}", []).append(record)

    # --- rollouts -------------------------------------------------------------------------------------------

    def _rollout(self, r: Rollout, out: dict) -> None:
        trace, root = self._ids.getrandbits(128) | 1, self._span_id()
        server = out.setdefault(f"rollout-server-{r.server}", [])
        attrs = {
            ROLLOUT_ID: r.rollout_id,
            TASK_ID: r.task_id,
            GROUP_ID: r.group_id,
            ENVIRONMENT: r.env.name,
            POLICY_VERSION: r.policy_version,
            STATUS: r.status,
        }
        if r.reward is not None:
            attrs[REWARD] = r.reward
        error = None
        if not r.completed:
            error = r.tools[-1].error if r.fail_in_tool else r.turns[-1].error
            attrs[ERROR] = error
        server.append(("rl.rollout", self.ns(r.start), self.ns(r.end), trace, root, None, attrs, error))
        for turn in r.turns:
            server.append(self._turn(r, turn, trace, root))
        sandbox = out.setdefault(f"sandbox-{r.sandbox}", [])
        for call in r.tools:
            attrs = {
                ROLLOUT_ID: r.rollout_id,
                TOOL: call.name,
                OPERATION: "execute_tool",
                SANDBOX: f"sbx-{r.rollout_id}",
                EXIT_CODE: call.exit_code,
                OBSERVATION: call.observation_tokens,
            }
            if call.error:
                attrs[ERROR] = call.error
            sandbox.append(
                (
                    f"execute_tool {call.name}",
                    self.ns(call.start),
                    self.ns(call.end),
                    trace,
                    self._span_id(),
                    root,
                    attrs,
                    call.error,
                )
            )
        for s in r.scorings:
            self._scoring(r, s, trace, root, out)

    def _turn(self, r: Rollout, t, trace: int, root: int) -> tuple:
        attrs = {
            ROLLOUT_ID: r.rollout_id,
            TURN_INDEX: t.index,
            POLICY_VERSION: r.policy_version,
            INPUT: t.input_tokens,
            CACHED: t.cached_input_tokens,
            OUTPUT: t.output_tokens,
            CONTEXT: t.context_tokens,
            PREFILL_S: round(t.prefill_s, 6),
            DECODE_S: round(t.decode_s, 6),
            TTFT_S: round(t.ttft_s, 6),
            MODEL: self.policy_model,
            LOGPROBS: t.logprobs_source,
        }
        if t.spec_k:
            attrs.update(
                {
                    DRAFT: t.draft_tokens,
                    ACCEPTED: t.accepted_tokens,
                    VERIFY: t.verify_steps,
                    SPEC_K: t.spec_k,
                    DRAFTER: r.drafter_version,
                    DRAFTER_PV: r.drafter_policy_version,
                }
            )
        if t.error:
            attrs[ERROR] = t.error
        if self.c.environment_on_turns:
            attrs[ENVIRONMENT] = r.env.name
        return ("rl.turn", self.ns(t.start), self.ns(t.end), trace, self._span_id(), root, attrs, t.error)

    def _scoring(self, r: Rollout, s, trace: int, root: int, out: dict) -> None:
        c = self.c
        attrs: dict = {ROLLOUT_ID: r.rollout_id}
        if s.kind == "reward":
            key, name = f"sandbox-{s.instance}", "rl.reward"
            attrs[REWARD_NAME] = r.env.reward_name
        elif s.kind == "judge":
            key, name = f"judge-{s.instance}", "rl.judge"
            attrs.update(
                {
                    INPUT: s.input_tokens,
                    OUTPUT: s.output_tokens,
                    JUDGE_STATUS: s.status,
                    MODEL: c.judge.model_name,
                    JUDGE_P: c.judge.model_parameters,
                }
            )
        else:
            key, name = f"teacher-{s.instance}", "rl.teacher"
            attrs.update(
                {TEACHER_TOKENS: s.tokens, MODEL: c.teacher.model_name, TEACHER_P: c.teacher.model_parameters}
            )
        if s.reward is not None:
            attrs[REWARD] = s.reward
        if s.error:
            attrs[ERROR] = s.error
        record = (name, self.ns(s.start), self.ns(s.end), trace, self._span_id(), root, attrs, s.error)
        out.setdefault(key, []).append(record)

    # --- trainer --------------------------------------------------------------------------------------------

    def _trainer(self, p: StepPlan, out: dict) -> None:
        trainer = out.setdefault("trainer-0", [])
        trace, root = self._ids.getrandbits(128) | 1, self._span_id()
        start, ready = self.ns(p.start), self.ns(p.ready)
        attrs = {
            TRAIN_STEP: p.step,
            POLICY_VERSION: p.policy_version,
            SAMPLES: p.train_samples,
            TRAIN_TOKENS: p.train_tokens,
            WAIT: (ready - start) / 1e9,
            LOSS: self._loss(p),
        }
        trainer.append(("rl.train_step", start, self.ns(p.end), trace, root, None, attrs, None))
        if self.c.emit_samples:
            for r in p.rollouts:
                attrs = {
                    ROLLOUT_ID: r.rollout_id,
                    TRAIN_STEP: p.step,
                    DECISION: r.decision,
                    STALENESS: r.staleness,
                }
                if r.decision == "used":
                    attrs[SAMPLE_TOKENS] = r.trajectory_tokens
                if r.mismatch is not None:
                    attrs.update(zip(MISMATCH, r.mismatch, strict=True))
                trainer.append(("rl.sample", ready, ready, trace, self._span_id(), root, attrs, None))
        sync = {POLICY_VERSION: p.policy_version}
        trainer.append(
            (
                "rl.weight_sync",
                self.ns(p.end),
                self.ns(p.sync_end),
                self._ids.getrandbits(128) | 1,
                self._span_id(),
                None,
                sync,
                None,
            )
        )

    def _loss(self, p: StepPlan) -> float:
        return train_loss(self.c, p)


def train_loss(c: SimConfig, p: StepPlan) -> float:
    """A plausible, slowly falling policy loss (the Learning page charts it; the ground truth keeps it)."""
    noise = random.Random(derive_seed(c.seed, "loss", p.step)).gauss(0, 0.02)
    return round(0.35 / (1 + 0.01 * p.index) + noise, 5)
