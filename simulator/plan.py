"""The plan's entities: a step, its groups and rollouts, and each rollout's turns, tool calls and scoring.

Plain data with times in seconds from the run's time zero. :mod:`simulator.dynamics` fills them in,
:mod:`simulator.records` turns them into spans and :mod:`simulator.groundtruth` counts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(slots=True)
class ToolCall:
    name: str
    start: float
    end: float
    observation_tokens: int
    exit_code: int
    error: str | None = None


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
    outputs: list[int] = field(default_factory=list)  # planned output tokens per turn
    tool_plan: list[tuple] = field(default_factory=list)  # (tool, observation tokens, seconds, exit code)
    status: str = "ok"
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
    turns: list[Turn] = field(default_factory=list)
    tools: list[ToolCall] = field(default_factory=list)
    scorings: list[Scoring] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0
    duration: float = 0.0  # from its first turn to its end (before placement)
    decision: str = "used"
    trajectory_tokens: int = 0
    # train-inference mismatch the trainer records on the sample (used samples of a run with mismatch_kl > 0):
    # (mismatch_kl, logprob_diff_mean, logprob_diff_max, importance_ratio_mean)
    mismatch: tuple[float, float, float, float] | None = None

    @property
    def completed(self) -> bool:
        return self.status == "ok"


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
    hung_started: list[Rollout] = field(default_factory=list)  # a silent worker's rollout: its first turn
    hung_ended: list[Rollout] = field(default_factory=list)  # ... and its rl.rollout span, when it is aborted

    @property
    def wait(self) -> float:
        return self.ready - self.start

    @property
    def policy_version(self) -> int:
        return self.step + 1
