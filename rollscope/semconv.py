"""The RL semantic conventions: every span name, attribute name and enum value rollscope reads.

This module is the dictionary behind ``docs/semconv.md`` (a test keeps the two equal). Names follow
OpenTelemetry's GenAI conventions where one exists (``gen_ai.usage.*``, ``gen_ai.tool.name``,
``execute_tool {name}``) and the ``rl.*`` proposal (open-telemetry/semantic-conventions-genai#88) for the RL
concepts GenAI has no word for. Each attribute has exactly one store column; the column name is what users
type in SQL, so it is short and never changes meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- span names -------------------------------------------------------------------------------------------
ROLLOUT = "rl.rollout"
TURN = "rl.turn"
TOOL_PREFIX = "execute_tool"  # span name is "execute_tool {gen_ai.tool.name}", as in the GenAI conventions
REWARD = "rl.reward"
JUDGE = "rl.judge"
TEACHER = "rl.teacher"
TRAIN_STEP = "rl.train_step"
SAMPLE = "rl.sample"
WEIGHT_SYNC = "rl.weight_sync"
VLLM_REQUEST = "llm_request"  # vLLM's own request span, mapped onto turns

SPAN_NAMES = {
    ROLLOUT: "One attempt at a task, from dispatch to its last turn, tool call and reward.",
    TURN: "One policy generation inside a rollout (prefill of the prompt, decode of the reply).",
    f"{TOOL_PREFIX} {{gen_ai.tool.name}}": "A tool call or sandbox execution made on the rollout's behalf.",
    REWARD: "A verifier (unit tests, exact match, a rule) producing the rollout's reward.",
    JUDGE: "A model judge scoring a rollout: judge inference.",
    TEACHER: "A teacher or reference model scoring a rollout's tokens (e.g. on-policy distillation).",
    TRAIN_STEP: (
        "One optimiser step of the trainer; it produces policy version rl.policy.version. A data-parallel "
        "trainer may record it once per process (one step: docs/metrics.md)."
    ),
    SAMPLE: "The trainer's decision about one rollout: used, or why not.",
    WEIGHT_SYNC: "New policy weights reaching the rollout workers.",
    VLLM_REQUEST: "vLLM's request span (--otlp-traces-endpoint); read as a turn.",
}

# --- enum values ------------------------------------------------------------------------------------------
ROLES = ("rollout", "train", "teacher", "judge", "env")
# The roles whose accelerator time and FLOPs are the compute terms, C_rollout + C_train + C_teacher + C_judge
# (docs/metrics.md); env processes run on CPUs, their time reported beside them as C_env.
COMPUTE_TERMS = ("rollout", "train", "teacher", "judge")
ROLLOUT_OK, ROLLOUT_INFRA_ERROR, ROLLOUT_ABORTED = "ok", "infra_error", "aborted"
ROLLOUT_STATUSES = (ROLLOUT_OK, ROLLOUT_INFRA_ERROR, ROLLOUT_ABORTED)
SAMPLE_DECISIONS = ("used", "stale", "zero_signal", "invalid", "unscored")
LOGPROB_SOURCES = ("policy", "drafter")
JUDGE_STATUSES = ("ok", "timeout", "error")
# Why a turn prefilled its history again (docs/metrics.md, "Repeated prefill by remedy").
CONTINUITY_BREAKS = ("retokenized", "evicted", "server_changed", "compacted")
# What cut a turn or rollout off (docs/metrics.md, "Truncation"): the request's response limit, the model's context
# length, or the rollout's turn or tool-call budget.
TRUNCATION_LIMITS = ("response", "context", "turns", "tools")
# The usable-experience funnel's stages (docs/metrics.md): what the funnel analysis counts, the report's keys, the
# pages' bars and the simulator's ground truth all list them from here. Each stage after the first has a rate, its
# count over the stage before's: ``<rate>_rate`` in the funnel analysis, ``funnel.rates.<rate>`` in the report.
# dispatched × the four stage rates = usable.
FUNNEL_STAGES = ("dispatched", "completed", "scored", "nonzero_signal", "fresh", "usable")
# stage -> the name of its rate (usable's rate is over dispatched: the product of the four before it)
FUNNEL_RATES = {
    "completed": "completion",
    "scored": "scoring",
    "nonzero_signal": "nonzero_signal",
    "fresh": "freshness",
    "usable": "usable",
}
# the four rates whose product is usable's
FUNNEL_STAGE_RATES = ("completion", "scoring", "nonzero_signal", "freshness")


@dataclass(frozen=True)
class Attribute:
    """One convention: its attribute name, the store column it lands in, and where it is set."""

    name: str
    column: str
    type: str  # "str" | "int" | "float"
    where: str  # "resource" or the span names that carry it
    doc: str
    aliases: tuple[str, ...] = ()  # other names (deprecated or vendor) that mean the same thing


_RESOURCE = "resource"
_ANY_RL = "rl.rollout, rl.turn, execute_tool, rl.reward, rl.judge, rl.teacher, rl.sample"

RESOURCE_ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("rl.run.id", "run_id", "str", _RESOURCE, "The run this process belongs to (required).", ()),
    Attribute(
        "service.name", "service_name", "str", _RESOURCE, "The process's service, e.g. rollout-worker."
    ),
    Attribute(
        "service.instance.id",
        "instance_id",
        "str",
        _RESOURCE,
        "One process; set by attach() when absent. Device-seconds are counted per instance.",
    ),
    Attribute("rl.compute.role", "role", "str", _RESOURCE, "rollout | train | teacher | judge | env."),
    Attribute(
        "rl.compute.devices",
        "devices",
        "float",
        _RESOURCE,
        "Accelerators this process occupies (0 for CPU-only); for env processes, CPU cores.",
    ),
    Attribute("rl.model.name", "model_name", "str", _RESOURCE, "The model this process serves or trains."),
    Attribute("rl.model.parameters", "model_parameters", "int", _RESOURCE, "Parameter count of that model."),
    Attribute("rl.algorithm", "algorithm", "str", _RESOURCE, "e.g. grpo, ppo, opd."),
    Attribute(
        "rl.staleness.bound",
        "staleness_bound",
        "int",
        _RESOURCE,
        "Most policy versions behind a sample may be.",
    ),
)

SPAN_ATTRIBUTES: tuple[Attribute, ...] = (
    # rollouts and their identity, propagated to child spans by the helpers
    Attribute("rl.rollout.id", "rollout_id", "str", _ANY_RL, "One attempt at a task."),
    Attribute("rl.task.id", "task_id", "str", "rl.rollout", "The task (prompt) attempted."),
    Attribute("rl.group.id", "group_id", "str", "rl.rollout", "The group of G attempts at one task."),
    Attribute("rl.environment.name", "environment", "str", "rl.rollout", "The environment, e.g. swe, math."),
    Attribute(
        "rl.task.prompt_tokens",
        "task_prompt_tokens",
        "int",
        "rl.rollout",
        "Tokens of the task prompt (system + task) every attempt of the group starts from, which a prefix "
        "cache lets the group share; absent: the rollout's first turn's input_tokens. No OTel or engine name.",
    ),
    Attribute(
        "rl.policy.version",
        "policy_version",
        "int",
        "rl.rollout, rl.turn, rl.train_step, rl.weight_sync",
        "Policy version that generated (rollout, turn) or that a train step produced / a sync delivered.",
    ),
    Attribute("rl.rollout.status", "rollout_status", "str", "rl.rollout", "ok | infra_error | aborted."),
    Attribute(
        "rl.reward.score",
        "reward",
        "float",
        "rl.rollout, rl.reward, rl.judge",
        "Reward; absent = not scored.",
    ),
    # turns (policy generations)
    Attribute("rl.turn.index", "turn_index", "int", "rl.turn", "0-based index of the turn in its rollout."),
    Attribute(
        "gen_ai.usage.input_tokens",
        "input_tokens",
        "int",
        "rl.turn, rl.judge",
        "Whole prompt of the generation, cached tokens included.",
        ("gen_ai.usage.prompt_tokens",),
    ),
    Attribute(
        "gen_ai.usage.cache_read.input_tokens",
        "cached_input_tokens",
        "int",
        "rl.turn, llm_request",
        "Prompt tokens reused from a prefix cache (not prefilled again).",
        ("gen_ai.usage.cached_tokens",),
    ),
    Attribute(
        "gen_ai.usage.output_tokens",
        "output_tokens",
        "int",
        "rl.turn, rl.judge",
        "Tokens decoded.",
        ("gen_ai.usage.completion_tokens",),
    ),
    Attribute(
        "gen_ai.usage.reasoning.output_tokens",
        "reasoning_tokens",
        "int",
        "rl.turn, llm_request",
        "Of the tokens decoded, those spent reasoning (already counted in gen_ai.usage.output_tokens).",
    ),
    Attribute(
        "gen_ai.usage.cache_creation.input_tokens",
        "cache_creation_input_tokens",
        "int",
        "rl.turn, llm_request",
        "Prompt tokens written to a provider's prompt cache (already counted in gen_ai.usage.input_tokens).",
    ),
    # truncation: which limit cut a generation or a rollout off (docs/metrics.md, "Truncation")
    Attribute(
        "rl.truncation.limit",
        "truncation_limit",
        "str",
        "rl.turn, rl.rollout",
        "The limit that cut it off: response (the request's max_tokens), context (the model's context length), "
        "turns or tools (the rollout's turn or tool-call budget); absent = not cut off by a limit.",
    ),
    Attribute(
        "gen_ai.request.max_tokens",
        "max_tokens",
        "int",
        "rl.turn",
        "The response limit the generation was asked for (TRL's max_completion_length, verl's response_length).",
    ),
    Attribute(
        "rl.model.context_length",
        "context_length",
        "int",
        "rl.turn",
        "The serving model's context length (vLLM's max_model_len): prompt and response together stop there.",
    ),
    Attribute(
        "rl.turn.context_tokens",
        "context_tokens",
        "int",
        "rl.turn",
        "Tokens of earlier turns in this prompt (history); with no cache reuse they are prefilled again.",
    ),
    # prefix continuity across turns and context compaction (docs/metrics.md, "Repeated prefill by remedy")
    Attribute(
        "rl.turn.prefix_tokens",
        "prefix_tokens",
        "int",
        "rl.turn",
        "Of this turn's history, the tokens identical, token for token, to the start of the previous turn's "
        "prompt and output: what an engine can reuse from its prefix cache. Token-level rendering keeps the "
        "whole history; re-tokenizing or re-rendering the chat template breaks it where the tokens first "
        "differ (fewer than rl.turn.context_tokens: continuity broke, retokenized). The engine's own count "
        "of what it reused is gen_ai.usage.cache_read.input_tokens (vLLM num_cached_tokens, SGLang "
        "cached_tokens); the history it reused is the least of the two.",
    ),
    Attribute(
        "rl.turn.continuity_break",
        "continuity_break",
        "str",
        "rl.turn",
        "Why this turn prefilled history again: retokenized (the history rendered differently), evicted (the "
        "exact prefix was not, or no longer, in the engine's cache, or the engine keeps none between calls), "
        "server_changed (a different server or replica than the previous turn's: OTel server.address) or "
        "compacted (the turn starts from a compacted context). Absent: compacted on a turn that records a "
        "compaction, retokenized when prefix_tokens < context_tokens, else unattributed.",
    ),
    Attribute(
        "rl.compaction.tokens_before",
        "compaction_tokens_before",
        "int",
        "rl.turn",
        "On the first turn after a context compaction: the history it would have read without it (the "
        "previous turn's prompt and output). verifiers: a compaction semantic edge; OpenAI Responses and "
        "Anthropic: a compaction item.",
    ),
    Attribute(
        "rl.compaction.tokens_after",
        "compaction_tokens_after",
        "int",
        "rl.turn",
        "On the first turn after a context compaction: the history it read instead (task prompt and summary), "
        "which starts a new training sample: the trainer trains on these tokens again.",
    ),
    Attribute(
        "gen_ai.latency.time_in_model_prefill",
        "prefill_time_s",
        "float",
        "rl.turn, llm_request",
        "Seconds spent in prefill (vLLM).",
    ),
    Attribute(
        "gen_ai.latency.time_in_model_decode",
        "decode_time_s",
        "float",
        "rl.turn, llm_request",
        "Seconds spent in decode (vLLM).",
    ),
    Attribute(
        "gen_ai.latency.time_to_first_token",
        "ttft_s",
        "float",
        "rl.turn, llm_request",
        "Time to first token (vLLM).",
    ),
    Attribute(
        "gen_ai.request.model", "request_model", "str", "rl.turn, rl.judge, rl.teacher", "Model asked."
    ),
    Attribute("gen_ai.operation.name", "operation_name", "str", "GenAI spans", "chat, text_completion, ..."),
    Attribute(
        "gen_ai.response.id",
        "response_id",
        "str",
        "rl.turn, llm_request",
        "Inference server request id.",
        ("gen_ai.request.id",),
    ),
    # speculative decoding
    Attribute(
        "rl.spec.draft_tokens", "spec_draft_tokens", "int", "rl.turn", "Tokens proposed by the drafter."
    ),
    Attribute(
        "rl.spec.accepted_tokens", "spec_accepted_tokens", "int", "rl.turn", "Drafted tokens accepted."
    ),
    Attribute("rl.spec.verify_steps", "spec_verify_steps", "int", "rl.turn", "Policy verification passes."),
    Attribute(
        "rl.spec.num_speculative_tokens", "spec_k", "int", "rl.turn", "Tokens drafted per verify step (k)."
    ),
    Attribute("rl.spec.drafter.version", "drafter_version", "str", "rl.turn", "Drafter in use."),
    Attribute(
        "rl.spec.drafter.policy_version",
        "drafter_policy_version",
        "int",
        "rl.turn",
        "Policy version the drafter was built from (for versions-since-refresh).",
    ),
    Attribute(
        "rl.logprobs.source",
        "logprobs_source",
        "str",
        "rl.turn",
        "policy | drafter: whose log-probabilities were recorded for training.",
    ),
    # tools and sandboxes
    Attribute("gen_ai.tool.name", "tool_name", "str", "execute_tool", "Tool called."),
    Attribute("gen_ai.tool.call.id", "tool_call_id", "str", "execute_tool", "Tool call id."),
    Attribute("rl.sandbox.id", "sandbox_id", "str", "execute_tool", "Sandbox / container that ran it."),
    Attribute("rl.tool.exit_code", "tool_exit_code", "int", "execute_tool", "Exit code (non-zero = failed)."),
    Attribute(
        "rl.tool.observation_tokens",
        "observation_tokens",
        "int",
        "execute_tool",
        "Tokens of tool output fed back to the policy.",
    ),
    # rewards, judges, teachers
    Attribute("rl.reward.name", "reward_name", "str", "rl.reward", "Verifier name."),
    Attribute("rl.judge.status", "judge_status", "str", "rl.judge, rl.reward", "ok | timeout | error."),
    Attribute(
        "rl.judge.model.parameters",
        "judge_model_parameters",
        "int",
        "rl.judge",
        "Judge model size (falls back to the process's rl.model.parameters).",
    ),
    Attribute(
        "rl.teacher.model.parameters",
        "teacher_model_parameters",
        "int",
        "rl.teacher",
        "Teacher model size (falls back to the process's rl.model.parameters).",
    ),
    Attribute(
        "rl.teacher.tokens_scored", "teacher_tokens", "int", "rl.teacher", "Tokens the teacher scored."
    ),
    # trainer
    Attribute("rl.train.step", "train_step", "int", "rl.train_step, rl.sample", "Optimiser step index."),
    Attribute("rl.train.samples", "train_samples", "int", "rl.train_step", "Samples in the step's batch."),
    Attribute("rl.train.tokens", "train_tokens", "int", "rl.train_step", "Tokens in the step's batch."),
    Attribute(
        "rl.train.wait_s", "train_wait_s", "float", "rl.train_step", "Seconds the step waited for data."
    ),
    Attribute("rl.train.loss", "train_loss", "float", "rl.train_step", "Loss, if the job reports it."),
    # what the trainer logs about the update (docs/metrics.md, "Training signals"), under the frameworks' names too
    Attribute(
        "rl.train.entropy",
        "train_entropy",
        "float",
        "rl.train_step",
        "Mean per-token entropy of the policy on the step's completions (nats).",
        ("entropy", "actor/entropy"),
    ),
    Attribute(
        "rl.train.kl",
        "train_kl",
        "float",
        "rl.train_step",
        "Mean per-token KL divergence of the policy from the reference policy (nats).",
        ("kl", "actor/kl_loss", "actor/reward_kl_penalty"),
    ),
    Attribute(
        "rl.train.policy_kl",
        "train_policy_kl",
        "float",
        "rl.train_step",
        "Mean per-token KL between the policy that sampled the batch and the one updated on it (PPO's approx KL).",
        ("actor/ppo_kl",),
    ),
    Attribute(
        "rl.train.clip_fraction",
        "train_clip_fraction",
        "float",
        "rl.train_step",
        "Share of tokens whose importance ratio the policy loss clipped.",
        ("clip_ratio/region_mean", "actor/pg_clipfrac"),
    ),
    Attribute(
        "rl.train.grad_norm",
        "train_grad_norm",
        "float",
        "rl.train_step",
        "Gradient norm of the update (before clipping, as the trainer logs it).",
        ("grad_norm", "actor/grad_norm"),
    ),
    Attribute(
        "rl.train.learning_rate",
        "train_learning_rate",
        "float",
        "rl.train_step",
        "Learning rate of the step.",
        ("learning_rate", "actor/lr"),
    ),
    # samples
    Attribute(
        "rl.sample.decision",
        "sample_decision",
        "str",
        "rl.sample",
        "used | stale | zero_signal | invalid | unscored.",
    ),
    Attribute(
        "rl.sample.staleness",
        "sample_staleness",
        "int",
        "rl.sample",
        "Policy versions between the rollout's policy and the consuming step's.",
    ),
    Attribute("rl.sample.tokens", "sample_tokens", "int", "rl.sample", "Tokens this sample contributes."),
    Attribute(
        "rl.sample.id",
        "sample_id",
        "str",
        "rl.sample, rl.turn",
        "One training sample of a rollout that compaction made several (one rl.sample span each; the funnel "
        "still counts the rollout once, the trainer's rl.train.samples every sample); on a turn, the new "
        "sample its compaction starts. verifiers: the branch.",
    ),
    # train-inference mismatch, as the trainer measured it on the sample's tokens (docs/metrics.md)
    Attribute(
        "rl.sample.mismatch_kl",
        "mismatch_kl",
        "float",
        "rl.sample",
        "KL(inference ‖ trainer) per token, mean over the sample: log-probs the engine recorded vs the trainer's.",
    ),
    Attribute(
        "rl.sample.logprob_diff.mean",
        "logprob_diff_mean",
        "float",
        "rl.sample",
        "Mean over the sample's tokens of |trainer log-prob − inference log-prob|.",
    ),
    Attribute(
        "rl.sample.logprob_diff.max",
        "logprob_diff_max",
        "float",
        "rl.sample",
        "Largest |trainer log-prob − inference log-prob| of any of the sample's tokens.",
    ),
    Attribute(
        "rl.sample.importance_ratio.mean",
        "importance_ratio_mean",
        "float",
        "rl.sample",
        "Mean over the sample's tokens of exp(trainer log-prob − inference log-prob).",
    ),
    # standard
    Attribute("error.type", "error_type", "str", "any", "OpenTelemetry's error class, e.g. timeout."),
)

ALL_ATTRIBUTES = RESOURCE_ATTRIBUTES + SPAN_ATTRIBUTES

# Attributes with no column of their own: they stay in a span's JSON ``attributes`` (a list, or a figure few
# analyses read), where SQL reads them by name (``attributes::JSON -> '$."gen_ai.response.finish_reasons"'``).
JSON_ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "gen_ai.response.finish_reasons",
        "attributes",
        "str[]",
        "rl.turn",
        "Why the model stopped generating (GenAI): `length` when a token limit cut it off (Truncation, below).",
    ),
    Attribute(
        "rl.sample.uses",
        "attributes",
        "int",
        "rl.sample",
        "Optimizer steps that trained on the sample (a trainer reusing its batches: TRL's `num_iterations`).",
    ),
    Attribute(
        "rl.sample.last_step", "attributes", "int", "rl.sample", "The last train step that trained on it."
    ),
)
FINISH_REASONS, SAMPLE_USES, SAMPLE_LAST_STEP = (a.name for a in JSON_ATTRIBUTES)

# --- content: what the agent said and did ----------------------------------------------------------------
# These attributes carry text, not figures. They never land in the spans dataset (a scan of spans must not read
# text): the collectors move them into the run's ``messages`` dataset, one row per message, under the capture
# policy (docs/store.md "Transcripts"). The names are OpenTelemetry GenAI's; values are JSON in GenAI's message
# shape (``[{"role": ..., "parts": [{"type": "text", "content": ...}, ...], "finish_reason": ...}]``), or plain
# text.


@dataclass(frozen=True)
class ContentAttribute:
    """One content convention: its attribute name, the ``source`` its rows get in ``messages``, where it is set."""

    name: str
    source: str
    where: str
    doc: str


CONTENT_ATTRIBUTES: tuple[ContentAttribute, ...] = (
    ContentAttribute(
        "gen_ai.system_instructions",
        "system",
        "rl.turn, rl.judge, GenAI spans",
        "System prompt or instructions: a JSON list of parts, or text. Role system.",
    ),
    ContentAttribute(
        "gen_ai.input.messages",
        "input",
        "rl.turn, rl.judge, GenAI spans",
        "Messages sent to the model. On rl.turn: only what this turn adds (the user message, tool results or "
        "observation), never the re-sent history; a GenAI span that re-sends its whole conversation is stored "
        "from the first message its trace had not sent before. On rl.judge: the judge's prompt.",
    ),
    ContentAttribute(
        "gen_ai.output.messages",
        "output",
        "rl.turn, rl.judge, GenAI spans",
        "The model's reply: text, reasoning parts, tool calls with arguments, finish_reason. On rl.judge: "
        "the judge's rationale.",
    ),
    ContentAttribute(
        "gen_ai.tool.call.arguments",
        "tool_arguments",
        "execute_tool",
        "The arguments the tool was called with (JSON, or text). Role assistant.",
    ),
    ContentAttribute(
        "gen_ai.tool.call.result",
        "tool_result",
        "execute_tool",
        "What the tool returned (its output, a test log, an observation). Role tool.",
    ),
)
CONTENT_SOURCES = {a.name: a.source for a in CONTENT_ATTRIBUTES}
# GenAI's earlier event conventions (span events), read as the same messages: event name -> (source, role).
CONTENT_EVENTS = {
    "gen_ai.system.message": ("system", "system"),
    "gen_ai.user.message": ("input", "user"),
    "gen_ai.assistant.message": ("input", "assistant"),
    "gen_ai.tool.message": ("input", "tool"),
    "gen_ai.choice": ("output", "assistant"),
}
# The event that carries the current attributes above as its own attributes (GenAI's opt-in event form).
CONTENT_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# The older indexed attributes many instrumentations still send (gen_ai.prompt.0.role, .content, ...).
CONTENT_INDEXED_PREFIXES = {"gen_ai.prompt.": "input", "gen_ai.completion.": "output"}
# The variable OpenTelemetry's GenAI instrumentations read for their capture switch; rollscope honours it.
GENAI_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def is_content(name: str) -> bool:
    """Whether an attribute name carries content (and so goes to ``messages``, never to the spans dataset)."""
    return name in CONTENT_SOURCES or name in _INDEXED_WHOLE or name.startswith(_INDEXED)


_INDEXED = tuple(CONTENT_INDEXED_PREFIXES)
_INDEXED_WHOLE = {prefix.rstrip(".") for prefix in CONTENT_INDEXED_PREFIXES}  # gen_ai.prompt as one text

RUN_ID = "rl.run.id"
SERVICE_INSTANCE_ID = "service.instance.id"
SERVICE_NAME = "service.name"
COMPUTE_ROLE = "rl.compute.role"
COMPUTE_DEVICES = "rl.compute.devices"
MODEL_NAME = "rl.model.name"
MODEL_PARAMETERS = "rl.model.parameters"
ALGORITHM = "rl.algorithm"
STALENESS_BOUND = "rl.staleness.bound"
PROCESS_PID = "process.pid"  # OpenTelemetry's own resource attribute

# Constants used by the helpers, so no attribute name is spelled twice in the code base.
ROLLOUT_ID = "rl.rollout.id"
TASK_ID = "rl.task.id"
GROUP_ID = "rl.group.id"
ENVIRONMENT = "rl.environment.name"
POLICY_VERSION = "rl.policy.version"
ROLLOUT_STATUS = "rl.rollout.status"
REWARD_SCORE = "rl.reward.score"
TURN_INDEX = "rl.turn.index"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
CACHED_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
OPERATION_NAME = "gen_ai.operation.name"
TRAIN_STEP_INDEX = "rl.train.step"
SAMPLE_DECISION = "rl.sample.decision"
SAMPLE_STALENESS = "rl.sample.staleness"
SPEC_DRAFT_TOKENS = "rl.spec.draft_tokens"
SPEC_ACCEPTED_TOKENS = "rl.spec.accepted_tokens"
SPEC_VERIFY_STEPS = "rl.spec.verify_steps"
SPEC_K = "rl.spec.num_speculative_tokens"


def by_name() -> dict[str, Attribute]:
    """Attribute name (and every alias) to its convention."""
    table = {a.name: a for a in ALL_ATTRIBUTES}
    for a in ALL_ATTRIBUTES:
        for alias in a.aliases:
            table.setdefault(alias, a)
    return table


def markdown() -> str:
    """docs/semconv.md, generated so the document and the code cannot drift (``python -m rollscope.semconv``)."""
    out = [
        "# RL semantic conventions",
        "",
        "Generated by `python -m rollscope.semconv > docs/semconv.md` from `rollscope/semconv.py`; a test keeps",
        "them equal. Names follow OpenTelemetry's GenAI conventions where one exists and the `rl.*` proposal",
        "(open-telemetry/semantic-conventions-genai#88) otherwise. *Column* is the store and view column: in",
        "SQL, and as keyword arguments of the `attach()` helpers.",
        "",
        "## Spans",
        "",
        "| span name | what it is |",
        "|---|---|",
        *(f"| `{name}` | {doc} |" for name, doc in SPAN_NAMES.items()),
        "",
        "## Enumerations",
        "",
        f"- `rl.compute.role`: {' | '.join(ROLES)}",
        f"- `rl.rollout.status`: {' | '.join(ROLLOUT_STATUSES)}",
        f"- `rl.sample.decision`: {' | '.join(SAMPLE_DECISIONS)}",
        f"- `rl.logprobs.source`: {' | '.join(LOGPROB_SOURCES)}",
        f"- `rl.judge.status`: {' | '.join(JUDGE_STATUSES)}",
        f"- `rl.turn.continuity_break`: {' | '.join(CONTINUITY_BREAKS)}",
        f"- `rl.truncation.limit`: {' | '.join(TRUNCATION_LIMITS)}",
    ]
    for title, table in (
        ("Resource attributes (once per process)", RESOURCE_ATTRIBUTES),
        ("Span attributes", SPAN_ATTRIBUTES),
        ("Span attributes without a column (read from the JSON `attributes`)", JSON_ATTRIBUTES),
    ):
        out += [
            "",
            f"## {title}",
            "",
            "| attribute | column | type | on | meaning |",
            "|---|---|---|---|---|",
        ]
        for a in table:
            alias = f" Also read from {', '.join(f'`{x}`' for x in a.aliases)}." if a.aliases else ""
            out.append(f"| `{a.name}` | `{a.column}` | {a.type} | {a.where} | {a.doc}{alias} |")
    out += [
        "",
        "## Content (transcripts)",
        "",
        "What the agent said and did. These attributes never land in the spans dataset: the collectors move",
        'them into the run\'s `messages` dataset (one row per message; docs/store.md, "Transcripts"), under',
        "the capture policy (docs/configuration.md). Values are JSON in GenAI's message shape",
        '(`[{"role": "user", "parts": [{"type": "text", "content": "..."}]}]`, with parts `text`,',
        "`reasoning`, `tool_call` {id, name, arguments} and `tool_call_response` {id, response}, and",
        "`finish_reason` on output messages), or plain text.",
        "",
        "| attribute | messages.source | on | meaning |",
        "|---|---|---|---|",
        *(f"| `{a.name}` | `{a.source}` | {a.where} | {a.doc} |" for a in CONTENT_ATTRIBUTES),
        "",
        "Also read as messages: GenAI's span events "
        + ", ".join(f"`{name}`" for name in CONTENT_EVENTS)
        + f" (their `content`, `tool_calls`, `message`, `finish_reason` and `id` attributes), `{CONTENT_DETAILS_EVENT}`",
        "(carrying the attributes above), and the older indexed attributes `gen_ai.prompt.N.role` / `.content`",
        "and `gen_ai.completion.N.*`. With capture off none of them is written anywhere.",
        "",
        "## Conventions the analyses apply",
        "",
        "- **Success.** A scored rollout succeeded when its `rl.reward.score` is at least the success threshold,",
        "  0.5 by default (`analyses.SUCCESS_THRESHOLD`, the `success_threshold=` argument): a binary 0/1 reward",
        "  and a [0, 1] judge score both read right. Solve rates and success rates count successes this way.",
        "- **Why a group carries no signal.** A group whose scored rewards are all equal is *all-wrong* when that",
        "  common reward is at most 0, *all-right* when it is at least 1, and *other-equal* otherwise (e.g. every",
        "  attempt scored 0.5); slime logs the same split as `zero_std/count_{reward}`.",
        "- **Train-inference mismatch.** A trainer that recomputes log-probabilities of a sample's tokens records",
        "  the gap on the sample's `rl.sample` span (the four `rl.sample.*` mismatch attributes above); they",
        "  correspond to prime-rl's `mismatch_kl`, SkyRL's `rollout_train_logprobs_abs_diff` and AReaL's",
        "  `behave_imp_weight`.",
        "- **Prefix continuity.** A turn's history (`rl.turn.context_tokens`) is served from cache up to the",
        "  least of the engine's cached count and the exact prefix (`rl.turn.prefix_tokens`); the rest is",
        "  prefilled again, for one reason: `compacted` on a turn that records a compaction, else the",
        "  `rl.turn.continuity_break` the job recorded, else `retokenized` when the exact prefix is shorter than",
        "  the history, else unattributed (an engine that reports only cached tokens says no more).",
        "- **Compaction and samples.** A compaction recorded on a turn starts a new training sample of the same",
        "  rollout (`rl.sample.id`): a trainer records one `rl.sample` per sample, all at the rollout's step. The",
        "  funnel counts the rollout once (its first step's decision); its `rl.sample.tokens` are summed; the",
        "  trainer's `rl.train.samples` counts every sample.",
        "- **Training signals.** A trainer records what it logs about each update on its `rl.train_step` span,",
        "  under the names above or under its own: TRL's `entropy`, `kl`, `clip_ratio/region_mean`, `grad_norm`",
        "  and `learning_rate`, verl's `actor/entropy`, `actor/kl_loss` (or `actor/reward_kl_penalty`),",
        "  `actor/pg_clipfrac`, `actor/grad_norm` and `actor/lr` land in the same columns. verl's `actor/ppo_kl` is",
        "  the KL of one update (the sampling policy against the updated one), not the KL to the reference: it",
        "  lands in `train_policy_kl`. A data-parallel trainer recording a step once per process: each figure is",
        "  the mean over its rows.",
        "- **Truncation.** A generation cut off by a token limit records `rl.truncation.limit` (and the limits,",
        "  `gen_ai.request.max_tokens` and `rl.model.context_length`, where it knows them); a rollout its agent loop",
        "  stopped at a turn or tool-call budget records `turns` or `tools` on its `rl.rollout` span. Without it, a",
        "  turn whose `gen_ai.response.finish_reasons` holds `length` was cut off by the context length when its",
        "  prompt and response reach `rl.model.context_length`, else by the response limit; a rollout by its",
        "  own limit, else its last turn's.",
        "- **The open `rl.*` proposal** (open-telemetry/semantic-conventions-genai#88) names the resource",
        "  attributes `rl.run.id`, `rl.algorithm`, `rl.model.name` and `rl.environment.name` exactly as above, so",
        "  they need no alias (it sets `rl.environment.name` on the resource; rollscope reads it on `rl.rollout`,",
        "  where one process serving several environments can still name each); its `rl.loop.*`, `rl.sample.*`, `rl.train.*` and `rl.sync.*` names are metric",
        "  namespaces (durations, counters), not span attributes, and have no per-span counterpart to alias.",
        "",
        "Attributes not listed here are kept, never dropped: they land in the JSON column `attributes` (span) or",
        "`resource_attributes` (resource). A listed attribute whose value has the wrong type is coerced when",
        'nothing is lost (`"3"` into an int column) and otherwise kept in `attributes` under its own name.',
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
