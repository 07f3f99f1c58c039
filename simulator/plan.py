"""The plan's entities: a step, its groups and rollouts, and each rollout's turns, tool calls and scoring.

Plain data with times in seconds from the run's time zero. :mod:`simulator.planner` fills them in,
:mod:`simulator.records` turns them into spans and :mod:`simulator.groundtruth` counts them.

A step's turns and tool calls (most of its spans) are held column-wise, one numpy array per field for the
whole step (:class:`TurnColumns`, :class:`ToolColumns`), so that planning, building spans and counting the
ground truth cost a few array operations per step instead of Python work per span. ``Rollout.turns`` and
``Rollout.tools`` give one rollout's rows as :class:`Turn` and :class:`ToolCall` objects, for reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from rollscope import semconv
from rollscope.simulator.config import Environment


@dataclass(slots=True)
class Turn:
    index: int
    start: float
    end: float
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    context_tokens: int
    prefill_s: float
    decode_s: float
    ttft_s: float
    spec_k: int = 0  # 0 = no speculative decoding on this turn
    draft_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0
    logprobs_source: str = "policy"
    error: str | None = None
    prefix: int = 0  # exact-prefix tokens of its history (rl.turn.prefix_tokens; later turns only)
    continuity: int = 0  # recorded continuity break: a code into TurnColumns.BREAKS
    compact_before: int = 0  # a compaction before this turn: its history without it ...
    compact_after: int = 0  # ... and with it (0, 0: none)
    sample: int = 0  # the rollout's training sample this turn belongs to (one more after each compaction)


@dataclass(slots=True)
class ToolCall:
    name: str
    start: float
    end: float
    observation_tokens: int
    exit_code: int
    error: str | None = None


@dataclass
class TurnColumns:
    """Every turn of a step, one array per field; ``rollout`` is the row's index in ``StepPlan.rollouts``.

    Rows are grouped by rollout, in turn order. ``error`` codes: 0 none, 1 ``cancelled``, 2
    ``inference_error``; ``drafter`` says whether the turn logged the drafter's log-probabilities.
    ``continuity`` codes (the break the harness recorded): 0 none, 1 ``evicted``, 2 ``server_changed``, 3
    ``compacted``; ``prefix`` is the exact prefix of the history (0 on first turns); ``compact_before`` /
    ``compact_after`` are a compaction's tokens on the turn after it (0 elsewhere); ``sample`` the rollout's
    training sample the turn belongs to.
    """

    rollout: np.ndarray
    index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    input_tokens: np.ndarray
    cached_input_tokens: np.ndarray
    output_tokens: np.ndarray
    context_tokens: np.ndarray
    prefill_s: np.ndarray
    decode_s: np.ndarray
    ttft_s: np.ndarray
    spec_k: np.ndarray
    draft_tokens: np.ndarray
    accepted_tokens: np.ndarray
    verify_steps: np.ndarray
    drafter: np.ndarray
    error: np.ndarray
    prefix: np.ndarray
    continuity: np.ndarray
    compact_before: np.ndarray
    compact_after: np.ndarray
    sample: np.ndarray

    ERRORS = (None, "cancelled", "inference_error")
    BREAKS = (None, "evicted", "server_changed", "compacted")

    def __len__(self) -> int:
        return len(self.rollout)

    @classmethod
    def of(cls, turns: list[Turn]) -> TurnColumns:
        """Columns of a few Turn objects, all of one rollout (the silent worker's hung turn)."""
        get = {f.name: f.name for f in fields(cls)}
        get.update(rollout=None, drafter=None, error=None)
        out = {name: np.asarray([getattr(t, attr) for t in turns]) for name, attr in get.items() if attr}
        out["rollout"] = np.zeros(len(turns), np.int64)
        out["drafter"] = np.asarray([t.logprobs_source == "drafter" for t in turns])
        out["error"] = np.asarray([cls.ERRORS.index(t.error) for t in turns], np.int64)
        return cls(**out)

    def row(self, i: int) -> Turn:
        return Turn(
            int(self.index[i]),
            float(self.start[i]),
            float(self.end[i]),
            int(self.input_tokens[i]),
            int(self.cached_input_tokens[i]),
            int(self.output_tokens[i]),
            int(self.context_tokens[i]),
            float(self.prefill_s[i]),
            float(self.decode_s[i]),
            float(self.ttft_s[i]),
            int(self.spec_k[i]),
            int(self.draft_tokens[i]),
            int(self.accepted_tokens[i]),
            int(self.verify_steps[i]),
            "drafter" if self.drafter[i] else "policy",
            self.ERRORS[self.error[i]],
            int(self.prefix[i]),
            int(self.continuity[i]),
            int(self.compact_before[i]),
            int(self.compact_after[i]),
            int(self.sample[i]),
        )

    def shift(self, offset: np.ndarray) -> None:
        """Move each row by its rollout's offset (placement on the clock)."""
        by_row = offset[self.rollout]
        self.start += by_row
        self.end += by_row


@dataclass
class ToolColumns:
    """Every tool call of a step, one array per field; ``tool`` indexes ``names``. A lost sandbox (``lost``)
    has exit code 137, no observation and the error ``sandbox_lost``."""

    rollout: np.ndarray
    tool: np.ndarray
    start: np.ndarray
    end: np.ndarray
    observation_tokens: np.ndarray
    exit_code: np.ndarray
    lost: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.rollout)

    def row(self, i: int) -> ToolCall:
        error = "sandbox_lost" if self.lost[i] else None
        return ToolCall(
            self.names[self.tool[i]],
            float(self.start[i]),
            float(self.end[i]),
            int(self.observation_tokens[i]),
            int(self.exit_code[i]),
            error,
        )

    def shift(self, offset: np.ndarray) -> None:
        by_row = offset[self.rollout]
        self.start += by_row
        self.end += by_row


def empty_turns() -> TurnColumns:
    return TurnColumns(**{f.name: np.zeros(0, np.int64) for f in fields(TurnColumns)})


@dataclass(slots=True)
class Scoring:
    """A verifier, judge or teacher call made for a rollout after its last turn."""

    kind: str  # "reward" | "judge" | "teacher"
    start: float
    end: float
    instance: int
    reward: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    status: str | None = None
    error: str | None = None
    name: str | None = None  # a verifier's reward_name, when not its environment's (an extra component)


@dataclass(slots=True)
class Rollout:
    rollout_id: str
    group_id: str
    task_id: str
    env: Environment
    member: int
    rng: object
    index: int = 0  # 0-based over the run: spreads judge and teacher calls over their pools
    server: int = 0
    sandbox: int = 0
    planned_turns: int = 0  # turns the agent would take if nothing fails
    planned_output: int = 0  # their output tokens, summed
    planned_tool_s: float = 0.0  # their tool calls' seconds, summed
    turn_budget_cut: bool = False  # the agent would have taken more turns than its environment's turns_max
    status: str = semconv.ROLLOUT_OK
    fail_turn: int = -1
    fail_in_tool: bool = False
    scored: bool = True
    reward: float | None = None
    signal: bool = False
    step: int = 0
    policy_version: int = 0
    staleness: int = 0
    drafter_version: str | None = None
    drafter_policy_version: int | None = None
    # the step's turn and tool columns and this rollout's rows in them: (first row, row count)
    turn_columns: TurnColumns | None = None
    turn_rows: tuple[int, int] = (0, 0)
    tool_columns: ToolColumns | None = None
    tool_rows: tuple[int, int] = (0, 0)
    prompt: int = 0
    offset: float = 0.0  # where placement moved it on the clock (its turns and tools move with it)
    scorings: list[Scoring] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    duration: float = 0.0  # from its first turn to its end (before placement)
    decision: str = "used"
    trajectory_tokens: int = 0  # what the trainer trains on: the sum of its samples' tokens
    sample_tokens: list[int] = field(
        default_factory=list
    )  # per training sample, when compaction made several
    # train-inference mismatch the trainer records on the sample (used samples of a run with mismatch_kl > 0):
    # (mismatch_kl, logprob_diff_mean, logprob_diff_max, importance_ratio_mean)
    mismatch: tuple[float, float, float, float] | None = None

    @property
    def completed(self) -> bool:
        return self.status == semconv.ROLLOUT_OK

    @property
    def turns(self) -> list[Turn]:
        first, n = self.turn_rows
        return [self.turn_columns.row(i) for i in range(first, first + n)]

    @property
    def tools(self) -> list[ToolCall]:
        first, n = self.tool_rows
        return [self.tool_columns.row(i) for i in range(first, first + n)]


@dataclass(slots=True)
class Group:
    group_id: str
    env: Environment
    task: int
    p_success: float
    rollouts: list[Rollout]
    lag: int = 0
    estimate: float = 0.0

    @property
    def signal(self) -> bool:
        return any(r.signal for r in self.rollouts)


@dataclass(slots=True)
class StepPlan:
    step: int
    index: int  # 0-based position in the run
    start: float  # version `step` available: the trainer starts waiting
    ready: float  # data ready: wait ends, compute starts
    end: float
    sync_end: float  # version step + 1 available
    train_samples: int
    train_tokens: int
    rollouts: list[Rollout]
    excursion: bool
    turns: TurnColumns = field(default_factory=empty_turns)
    tools: ToolColumns | None = None
    hung_started: list[Rollout] = field(default_factory=list)  # a silent worker's rollout: its first turn
    hung_ended: list[Rollout] = field(default_factory=list)  # ... and its rl.rollout span, when it is aborted

    @property
    def wait(self) -> float:
        return self.ready - self.start

    @property
    def policy_version(self) -> int:
        return self.step + 1
