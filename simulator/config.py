"""Every knob of a simulated run, with defaults that look like a real asynchronous agent-RL job.

A config is plain data: presets (``presets/*.json``) and ``--config`` files are JSON objects holding any subset
of these fields (nested objects merge key by key), so a run is fully described by the resolved config and
its seed. Positions in the run (refreshes, excursions) are fractions of the steps, so a preset keeps its
shape when ``--steps`` changes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from rollscope.errors import RollscopeError


class ConfigError(RollscopeError):
    """A preset, config file or knob that cannot be used."""


@dataclass
class Tool:
    """One tool an environment's agent calls: how often, how much it returns, how long it runs."""

    name: str
    weight: float
    observation_tokens: int  # mean tokens of output fed back to the policy (lognormal)
    seconds: float  # mean wall time in the sandbox (lognormal)
    fail_exit_rate: float = 0.3  # share of calls with a non-zero exit code (failing tests, bad command)


@dataclass
class Environment:
    """An environment's shape: turns, token sizes, tools, how it is scored, how it fails."""

    name: str
    kind: str  # "coding" (many turns, tools, unit tests) | "reasoning" (one long generation) | "judged"
    share: float  # share of the groups of each step
    tasks: int = 500  # task pool; a task's difficulty is fixed for the run
    difficulty_mean: float = 0.0  # logit; success probability = sigmoid(skill - difficulty)
    difficulty_spread: float = 1.6
    prompt_tokens: int = 1200  # mean task prompt (system + task), shared by the group
    turns_mean: float = 1.0  # mean policy turns per rollout (geometric tail above turns_min)
    turns_min: int = 1
    turns_max: int = 1
    output_tokens: int = 400  # mean decoded tokens per turn (lognormal)
    output_sigma: float = 0.5
    output_max: int = 32768
    length_growth: float = 0.0  # relative growth of output lengths from the first to the last step
    tools: list[Tool] = field(default_factory=list)
    infra_failure_rate: float = 0.02  # per rollout (sandbox lost, inference error, preemption)
    infra_failure_drift: float = 0.0  # added to the rate linearly over the run
    aborted_share: float = 0.2  # of infra failures, the share that are 'aborted' rather than 'infra_error'
    scoring_failure_rate: float = 0.005  # judge timeouts (judged) or verifier errors (others)
    scoring_failure_drift: float = 0.0
    reward_name: str = "exact_match"  # verifier of coding/reasoning envs
    reward_seconds: float = 0.05
    spec_acceptance: float = 0.7  # per-token acceptance of a drafter built from the current policy
    spec_k: int = 4  # tokens drafted per verify step; 0 = no speculative decoding in this env
    # prefix continuity: share of later turns whose history the harness renders differently from the tokens the
    # model saw (a chat template re-rendered), so the exact prefix ends at a random point of the history
    retokenize_rate: float = 0.0
    # context compaction: a turn whose history would exceed compact_above tokens reads the task prompt and a
    # summary of compact_summary_tokens instead, and starts a new training sample (0 = never compacts)
    compact_above: int = 0
    compact_summary_tokens: int = 2000


@dataclass
class Process:
    """A kind of simulated process: how many, what each occupies, which model it serves."""

    count: int
    devices: float
    model_name: str
    model_parameters: int


@dataclass
class Rates:
    """Fixed funnel rates (the worked example). ``None`` = emergent from the dynamics."""

    completion: float | None = None
    scoring: float | None = None
    nonzero_signal: float | None = None
    freshness: float | None = None


@dataclass
class Levers:
    """The advisor's levers pulled on a run (docs/advisor.md), so a run can be simulated again with the same seed
    and one lever applied. The defaults pull none (the run is unchanged); the task-selection and staleness levers
    are ``rates.nonzero_signal`` and ``staleness_bound`` themselves."""

    fix_scoring: bool = False  # no judge timeouts or verifier errors
    fix_infra: bool = False  # no infra errors or aborts
    drafter_refresh_every: int = 0  # also refresh the drafter every N policy versions (0: never)
    prefix_continuity: bool = False  # later turns find their whole history in the cache (exact continuity)
    share_prompt: bool = False  # every group member after the first finds the task prompt in the cache
    no_compaction: bool = False  # no environment compacts its contexts
    spec_long_tokens: int = 8192  # rollouts decoding at least this many tokens ...
    spec_long_extra_k: int = 0  # ... draft this many more tokens per verify step


@dataclass
class Transcripts:
    """What the simulated agents, tools and judges say (simulator/transcripts.py), and the flags injected into
    it with known rollouts (docs/metrics.md, "Transcript flags")."""

    enabled: bool = True  # write transcripts: the helpers' content arguments (false: no messages)
    chars_per_token: float = 4.0  # characters of text per token a span counts ...
    max_chars: int = 2000  # ... up to this many per text (a 3,200-token test log: 2,000 characters)
    answer_missing_rate: float = 0.02  # completed rollouts whose final reply is empty or gives no answer
    loop_rate: float = 0.03  # reasoning replies that fall into repeating one passage


@dataclass
class SimConfig:
    seed: int = 7
    steps: int = 40
    first_step: int = 0  # a run resumed from a checkpoint starts later (its early steps can already be stale)
    base_time: str = "2026-01-01T00:00:00Z"  # simulated time zero
    algorithm: str = "grpo"
    group_size: int = 8
    groups_per_step: int = 8
    emit_samples: bool = True
    environments: list[Environment] = field(default_factory=lambda: default_environments())
    # policy ability: logit added to every task, growing over the run (tasks get easier, groups saturate)
    skill_start: float = 0.0
    skill_gain: float = 3.0
    rates: Rates = field(default_factory=Rates)
    # asynchronous staleness: P(lag = 0, 1, 2, ...) policy versions between dispatch and consumption
    staleness_bound: int = 2
    lag_weights: list[float] = field(default_factory=lambda: [0.04, 0.56, 0.30, 0.07, 0.03])
    staleness_excursion: list[float] | None = field(default_factory=lambda: [0.45, 0.55])
    excursion_lag_weights: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.3, 0.25, 0.2])
    # trainer-side slack: completions spread over (1 + starvation) of the previous step, so it sometimes waits
    starvation: float = 0.15
    # processes
    rollout: Process = field(default_factory=lambda: Process(4, 8, "Qwen3-32B", 32_800_000_000))
    trainer: Process = field(default_factory=lambda: Process(1, 8, "Qwen3-32B", 32_800_000_000))
    judge: Process = field(default_factory=lambda: Process(2, 4, "Llama-3.3-70B-Instruct", 70_600_000_000))
    teacher: Process = field(default_factory=lambda: Process(0, 8, "Qwen2.5-72B-Instruct", 72_700_000_000))
    sandbox: Process = field(default_factory=lambda: Process(4, 64, "sandbox", 0))
    # inference speeds (per request, on a busy server)
    prefill_tokens_per_s: float = 12_000.0
    decode_tokens_per_s: float = 45.0
    queue_seconds: float = 0.25
    judge_tokens_per_s: float = 60.0
    judge_prompt_tokens: int = 900  # rubric added to the judged answer
    judge_output_tokens: int = 220
    judge_timeout_s: float = 60.0
    teacher_tokens_per_s: float = 40_000.0
    # trainer
    device_peak_flops: float = 989e12  # bf16 dense, H100
    trainer_mfu: float = 0.25
    step_overhead_s: float = 15.0
    weight_sync_s: float = 4.0
    warmup_period_s: float = 120.0  # assumed step period before the run's first step (resumed runs)
    # prefix caching: share of turns whose history is found in the cache (0 = every turn re-prefills it)
    prefix_cache_hit_rate: float = 0.9
    cache_block_tokens: int = 16
    # of the later turns that miss the cache, the share sent to another server replica (none of their history
    # cached there: continuity_break server_changed); the others find part of it (evicted)
    server_change_share: float = 0.3
    # share of group members after the first that find the task prompt in the cache (null: prefix_cache_hit_rate)
    group_prompt_hit_rate: float | None = None
    # speculative decoding
    spec_decoding: bool = True
    drafter_refreshes: list[float] = field(default_factory=lambda: [0.5])
    spec_version_decay: float = 0.008  # acceptance × exp(-decay × versions since the drafter was built)
    spec_length_gain: float = 0.15  # acceptance × (1 + gain × min(1, context / 16k)): suffix drafting
    logprob_drafter: list[float] | None = (
        None  # [from, to) fraction of policy versions logging drafter logprobs
    )
    levers: Levers = field(default_factory=Levers)
    # train-inference mismatch: the trainer records on each used sample a KL per token around mismatch_kl
    # (0 = it records none), mismatch_excursion_factor times larger over the [from, to) fraction of the steps
    mismatch_kl: float = 0.0
    mismatch_excursion: list[float] | None = None
    mismatch_excursion_factor: float = 20.0
    # is it stuck (simulator/health.py; all off by default, on in the `stall` preset)
    silent_worker: dict | None = (
        None  # {"server": i, "at": position, "seconds": s}: rollout server i goes silent
    )
    scoring_stall: list[float] | None = None  # [from, to) positions of steps whose scoring is slowed down
    scoring_stall_factor: float = 10.0  # how many times slower (a judge stays under its timeout)
    weight_sync_bubbles: list[float] | None = None  # [from, to) positions of steps whose weight sync is slow
    weight_sync_bubble_factor: float = 12.0  # how many times longer those weight syncs take
    environment_on_turns: bool = False  # turns carry rl.environment (in-flight rollouts by environment)
    transcripts: Transcripts = field(default_factory=Transcripts)
    # is training going wrong (simulator/training.py): what the trainer logs about each update ...
    train_signals: bool = (
        True  # record entropy, KL, clip fraction, grad norm and learning rate on train steps
    )
    entropy_start: float = 0.55  # nats per token at the first step
    entropy_decay: float = 0.3  # share of it lost by the last step
    kl_end: float = 0.04  # KL to the reference by the last step (from about 0, growing linearly)
    learning_rate: float = 1e-6
    context_length: int = 262_144  # the rollout servers' context length (max_model_len), recorded on turns
    # environment -> extra scoring components: [{"name", "kind": "bonus" | "check", "value", "rate"}]
    reward_components: dict = field(default_factory=dict)
    # ... and the failures it can inject, each {"at": position, ...} (docs/simulator.md; all off by default)
    entropy_collapse: dict | None = None  # {"at", "until", "factor"}: entropy falls to factor × itself
    kl_acceleration: dict | None = None  # {"at", "rate"}: the KL grows by rate a step, exponentially
    length_shift: dict | None = None  # {"at", "factor", "steps", "environments"}: output lengths × factor
    reward_takeover: dict | None = None  # {"at", "environment", "component", "value", "steps"}
    reward_hacking: dict | None = None  # {"at", "environment", "strength", "steps"}
    group_collapse: dict | None = None  # {"at", "nonzero_signal"}: groups collapse to that rate
    mismatch_rising: dict | None = None  # {"at", "rate"}: the train-inference KL grows by rate a step


def default_environments() -> list[Environment]:
    """A coding agent, a reasoning task and a judge-scored research task."""
    return [
        Environment(
            name="swe",
            kind="coding",
            share=0.4,
            difficulty_mean=1.2,
            prompt_tokens=2500,
            turns_mean=12,
            turns_min=3,
            turns_max=40,
            output_tokens=150,
            output_sigma=0.6,
            output_max=4096,
            length_growth=0.1,
            tools=[
                Tool("run_tests", 0.45, 3200, 12.0, 0.6),
                Tool("read_file", 0.25, 2800, 0.3, 0.02),
                Tool("bash", 0.22, 1100, 2.0, 0.2),
                Tool("edit_file", 0.08, 150, 0.2, 0.05),
            ],
            infra_failure_rate=0.06,
            infra_failure_drift=0.03,
            scoring_failure_rate=0.004,
            reward_name="unit_tests",
            reward_seconds=20.0,
            spec_acceptance=0.8,
            spec_k=4,
            retokenize_rate=0.08,
            compact_above=48_000,
            compact_summary_tokens=3000,
        ),
        Environment(
            name="math",
            kind="reasoning",
            share=0.35,
            difficulty_mean=0.3,
            prompt_tokens=450,
            output_tokens=5000,
            output_sigma=0.75,
            output_max=32768,
            length_growth=0.6,
            infra_failure_rate=0.015,
            scoring_failure_rate=0.003,
            reward_name="exact_match",
            reward_seconds=0.05,
            spec_acceptance=0.72,
            spec_k=4,
        ),
        Environment(
            name="research",
            kind="judged",
            share=0.25,
            difficulty_mean=0.0,
            prompt_tokens=900,
            turns_mean=3,
            turns_min=1,
            turns_max=6,
            output_tokens=450,
            output_sigma=0.5,
            output_max=8192,
            length_growth=0.3,
            tools=[Tool("web_search", 0.7, 1200, 1.5, 0.05), Tool("fetch_page", 0.3, 2400, 0.8, 0.1)],
            infra_failure_rate=0.02,
            scoring_failure_rate=0.03,
            scoring_failure_drift=0.04,
            spec_acceptance=0.6,
            spec_k=3,
        ),
    ]


# --- loading -----------------------------------------------------------------------------------------------


def preset_names() -> list[str]:
    return sorted(
        p.name[:-5]
        for p in resources.files("rollscope.simulator.presets").iterdir()
        if p.name.endswith(".json")
    )


def load_preset(name: str) -> dict:
    """A preset's JSON overrides (``default`` is the empty one)."""
    if name not in preset_names():
        raise ConfigError(
            "Unknown preset", f"no simulator preset {name!r}; presets: {', '.join(preset_names())}"
        )
    return json.loads(resources.files("rollscope.simulator.presets").joinpath(f"{name}.json").read_text())


def load_file(path: Path | str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as e:
        raise ConfigError("No config file", f"{path} does not exist") from e
    except json.JSONDecodeError as e:
        raise ConfigError("Bad config file", f"{path} is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError("Bad config file", f"{path} must hold a JSON object of knobs")
    return data


def resolve(preset: str = "default", overrides: list[dict] | None = None) -> SimConfig:
    """Defaults ⊕ preset ⊕ each override, in order; unknown knobs are refused, never ignored."""
    data = to_dict(SimConfig())
    for layer in [load_preset(preset), *(overrides or [])]:
        data = merge(data, layer)
    return from_dict(data)


def merge(base: dict, layer: dict) -> dict:
    """Nested objects merge key by key; lists (environments included) are replaced whole."""
    out = dict(base)
    for key, value in layer.items():
        if key.startswith("_"):  # comments in presets
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def to_dict(config: SimConfig) -> dict:
    """The config as plain data; levers only when one is pulled, so runs without them keep their ground truth."""
    data = dataclasses.asdict(config)
    if data["levers"] == dataclasses.asdict(Levers()):
        del data["levers"]
    return data


def from_dict(data: dict) -> SimConfig:
    try:
        config = _build(SimConfig, data)
    except (TypeError, ValueError) as e:
        raise ConfigError("Bad simulator config", str(e)) from e
    validate(config)
    return config


def _build(cls, data):
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} must be an object, not {data!r}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(known) - {k for k in data if k.startswith("_")}
    if unknown:
        raise ValueError(f"unknown {cls.__name__} knob(s): {', '.join(sorted(unknown))}")
    kwargs = {}
    for name, value in data.items():
        if name.startswith("_"):
            continue
        kwargs[name] = _field_value(name, value)
    return cls(**kwargs)


_NESTED = {
    "rates": Rates,
    "rollout": Process,
    "trainer": Process,
    "judge": Process,
    "teacher": Process,
    "sandbox": Process,
    "levers": Levers,
    "transcripts": Transcripts,
}


def _field_value(name: str, value):
    if name in _NESTED:
        return _build(_NESTED[name], value)
    if name == "environments":
        return [_environment(e) for e in value]
    return value


def _environment(data: dict) -> Environment:
    data = dict(data)
    data["tools"] = [_build(Tool, t) for t in data.get("tools", [])]
    return _build(Environment, data)


def validate(c: SimConfig) -> None:
    """Refuse configs the dynamics cannot honour, with the knob named."""
    checks = [
        (c.steps >= 1, "steps must be >= 1"),
        (c.first_step >= 0, "first_step must be >= 0"),
        (c.group_size >= 1 and c.groups_per_step >= 1, "group_size and groups_per_step must be >= 1"),
        (bool(c.environments), "at least one environment is needed"),
        (
            all(e.kind in ("coding", "reasoning", "judged") for e in c.environments),
            "environment kind must be coding, reasoning or judged",
        ),
        (len({e.name for e in c.environments}) == len(c.environments), "environment names must be unique"),
        (all(e.share > 0 for e in c.environments), "environment share must be > 0"),
        (all(e.tools for e in c.environments if e.kind == "coding"), "a coding environment needs tools"),
        (c.rollout.count >= 1 and c.trainer.count == 1, "one trainer and at least one rollout server"),
        (c.sandbox.count >= 1, "at least one sandbox host"),
        (
            c.judge.count >= 1 or not any(e.kind == "judged" for e in c.environments),
            "a judged environment needs judge.count >= 1",
        ),
        (
            sum(c.lag_weights) > 0 and all(w >= 0 for w in c.lag_weights),
            "lag_weights must be >= 0, not all 0",
        ),
        (0 <= c.prefix_cache_hit_rate <= 1, "prefix_cache_hit_rate must be in [0, 1]"),
        (0 <= c.server_change_share <= 1, "server_change_share must be in [0, 1]"),
        (
            c.group_prompt_hit_rate is None or 0 <= c.group_prompt_hit_rate <= 1,
            "group_prompt_hit_rate must be in [0, 1] or null",
        ),
        (
            all(0 <= e.retokenize_rate <= 1 for e in c.environments),
            "environment retokenize_rate must be in [0, 1]",
        ),
        (
            all(e.compact_above >= 0 and e.compact_summary_tokens >= 0 for e in c.environments),
            "environment compact_above and compact_summary_tokens must be >= 0",
        ),
        (c.staleness_bound >= 0, "staleness_bound must be >= 0"),
        (c.levers.drafter_refresh_every >= 0, "levers.drafter_refresh_every must be >= 0"),
        (
            c.transcripts.chars_per_token > 0 and c.transcripts.max_chars >= 16,
            "transcripts.chars_per_token must be > 0 and transcripts.max_chars >= 16",
        ),
        (
            0 <= c.transcripts.answer_missing_rate <= 1 and 0 <= c.transcripts.loop_rate <= 1,
            "transcripts.answer_missing_rate and transcripts.loop_rate must be in [0, 1]",
        ),
        (c.levers.spec_long_extra_k >= 0, "levers.spec_long_extra_k must be >= 0"),
        (c.mismatch_kl >= 0 and c.mismatch_excursion_factor > 0, "mismatch_kl must be >= 0, its factor > 0"),
        (
            c.silent_worker is None
            or (
                0 <= int(c.silent_worker.get("server", 0)) < c.rollout.count
                and float(c.silent_worker.get("seconds", 0)) > 0
            ),
            "silent_worker needs a server below rollout.count and seconds > 0",
        ),
    ]
    checks += _training_checks(c)
    for rate in dataclasses.astuple(c.rates):
        checks.append((rate is None or 0 <= rate <= 1, "rates must be in [0, 1] or null"))
    for ok, message in checks:
        if not ok:
            raise ConfigError("Bad simulator config", message)


_FAILURE_KNOBS = (
    "entropy_collapse",
    "kl_acceleration",
    "length_shift",
    "reward_takeover",
    "reward_hacking",
    "group_collapse",
    "mismatch_rising",
)


def _training_checks(c: SimConfig) -> list[tuple[bool, str]]:
    """The knobs of simulator/training.py: each failure an object with a position "at" in [0, 1]; reward
    components of known environments, each a bonus or a check."""
    names = {e.name for e in c.environments}
    specs = [spec for specs in c.reward_components.values() for spec in specs]
    out = [
        (set(c.reward_components) <= names, "reward_components names an unknown environment"),
        (
            all(isinstance(s, dict) and "name" in s and s.get("kind") in ("bonus", "check") for s in specs),
            'each reward component needs a "name" and a "kind" of "bonus" or "check"',
        ),
        (
            c.entropy_start > 0 and 0 <= c.entropy_decay < 1,
            "entropy_start must be > 0, entropy_decay in [0, 1)",
        ),
        (c.context_length >= 1, "context_length must be >= 1"),
    ]
    for knob in _FAILURE_KNOBS:
        value = getattr(c, knob)
        at = value.get("at") if isinstance(value, dict) else None
        ok = value is None or (isinstance(at, int | float) and not isinstance(at, bool) and 0 <= at <= 1)
        out.append((ok, f'{knob} must be null or an object with "at" in [0, 1]'))
    for knob in ("reward_takeover", "reward_hacking"):
        value = getattr(c, knob)
        out.append((not value or value.get("environment") in names, f"{knob} names an unknown environment"))
    return out
