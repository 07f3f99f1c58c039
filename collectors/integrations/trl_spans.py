"""What the TRL adapter's rounds, steps and weight syncs become: the span building half of the adapter.

``rollscope.integrations.trl`` patches TRL's trainer (its hooks note times and keep references on the training
thread, into a ``_Batch`` per generation round); everything here runs later, on the adapter's own thread
(``Handover``), and turns what the hooks kept into spans: ``rl.rollout``, ``rl.turn``, ``execute_tool``,
``rl.reward``, ``rl.sample``, ``rl.train_step`` and ``rl.weight_sync`` (the adapter's docstring says what each
carries). It is separate from the hooks so that what a step or a rollout becomes can be read, and changed,
without reading how TRL is patched, and so that the other adapters (verl, TRL's async trainer) share its
attribute names and span sinks (``_Columns``, ``_SDKSpans``) without importing TRL's hooks.

``TRLSpans`` is the span building methods of ``TRLInstrumentation`` (a mixin: they read the handle's trainer,
its span sink ``_out`` and its ``counts``); the module's functions hold what those methods compute.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from rollscope import semconv
from rollscope.collectors.content import encode, structured
from rollscope.collectors.spans import CONTENT_FIELDS, attributes_from_fields
from rollscope.integrations.trl_decisions import _decisions, _nansum

_TASK_ID_MAX = 1000
FINISH_REASONS = semconv.FINISH_REASONS  # GenAI convention; kept in the span's `attributes` JSON
TIMING = "rollscope.turn.timing"  # "apportioned": the turn's times are a share of the generation window
# A turn's finish reasons, one tuple each (the SDK keeps a sequence attribute as a tuple).
_STOP, _LENGTH, _TOOL_CALLS = ("stop",), ("length",), ("tool_calls",)
# The convention names of the fields the per-sample spans carry, looked up once: those spans (thousands a
# step) build their attribute dicts directly, in the order ``_attributes`` gives them.
_NAME = {a.column: a.name for a in semconv.SPAN_ATTRIBUTES}
_TASK, _GROUP, _ENVIRONMENT = _NAME["task_id"], _NAME["group_id"], _NAME["environment"]
_VERSION, _STATUS, _SCORE = _NAME["policy_version"], _NAME["rollout_status"], _NAME["reward"]
_TURN, _INPUT, _OUTPUT = _NAME["turn_index"], _NAME["input_tokens"], _NAME["output_tokens"]
_REWARD_NAME, _STEP, _DECISION = _NAME["reward_name"], _NAME["train_step"], _NAME["sample_decision"]
_STALENESS, _SAMPLE_TOKENS = _NAME["sample_staleness"], _NAME["sample_tokens"]
_PROMPT, _CONTEXT, _PREFIX = _NAME["task_prompt_tokens"], _NAME["context_tokens"], _NAME["prefix_tokens"]
_CACHED, _BREAK = _NAME["cached_input_tokens"], _NAME["continuity_break"]
_INPUT_MESSAGES, _OUTPUT_MESSAGES = CONTENT_FIELDS["input"][0], CONTENT_FIELDS["output"][0]
_CONTENT = dict(CONTENT_FIELDS[key] for key in ("input", "output"))  # attribute: the source it encodes
_MAX_TOKENS, _CONTEXT_LENGTH = _NAME["max_tokens"], _NAME["context_length"]


def _columns(attributes: dict) -> dict:
    """One span's attributes as ``spans()`` takes a block's: a list per name."""
    return {key: [value] for key, value in attributes.items()}


def _private_provider(rl) -> bool:
    """True when attach() made the adapter's provider and nothing but the store exporter reads its spans
    (the default, ``set_global=False``): then the adapter may queue its spans as columns (``_Columns``)."""
    processors = getattr(getattr(rl.provider, "_active_span_processor", None), "_span_processors", None)
    return bool(getattr(rl.provider, "_rollscope_made", False)) and tuple(processors or ()) == (rl.processor,)


def _attributes(fields: dict, extra: dict | None = None, rollout_id: str | None = None) -> dict:
    """A span's attributes as the span helpers (``rl.rollout`` ...) build them: raw ``extra`` first, then
    the column-named ``fields``, then the enclosing rollout's id."""
    attributes = {**extra, **attributes_from_fields(fields)} if extra else attributes_from_fields(fields)
    if rollout_id is not None:
        attributes.setdefault(semconv.ROLLOUT_ID, rollout_id)
    return attributes


class _Columns:
    """The adapter's spans as store columns, a block per kind of span, handed to attach()'s processor in one
    call per batch (``SpanColumns``).

    Why not SDK spans: the adapter writes its spans after the fact, hundreds a step, on a machine whose cores
    training keeps busy. An SDK span (its sampler, attribute checks, context and a dozen objects, read back by
    the processor at once) cost ~50 us of CPU each; a span as a record, a tuple and an attribute dict, ~12 us
    from building to the table; in a block of its kind here, ~7 us. The rows are the SDK path's (ids from a
    private generator, scope, resource, kind and status: tested), and go through the same processor queue,
    bound and drop accounting, exporter and store. Used only when the provider is attach()'s own and the
    store exporter its only reader (``_SDKSpans`` otherwise, so a job's own processors still see every span).
    """

    def __init__(self, rl):
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from rollscope.collectors.rows import SpanColumns

        self._new = SpanColumns
        self._scope = getattr(rl.tracer, "_instrumentation_scope", None) or InstrumentationScope("rollscope")
        self._resource = rl.provider.resource
        self._columns = SpanColumns(self._scope, self._resource)
        self._processor = rl.processor
        self._ids = rl.provider.id_generator  # attach()'s PrivateIds: not the random that training seeds

    def spans(self, name: str, starts: list, ends: list, attributes: dict, parents=None, parent_of=None):
        """Record ``len(starts)`` finished spans named ``name``, ``attributes`` one list per name (None: the
        span has none); each a root with its own trace, or, given ``parents`` (what this returned for them)
        and ``parent_of`` (each span's parent's position there), a child. Returns their handle."""
        span_ids = self._ids.many(len(starts), 64)
        if parents is None:
            trace_ids = [trace.to_bytes(16, "big") for trace in self._ids.many(len(starts), 128)]
            parent_ids = None
        else:
            parent_traces, parent_spans = parents
            trace_ids = [parent_traces[i] for i in parent_of]
            parent_ids = [parent_spans[i] for i in parent_of]
        self._columns.add(name, trace_ids, span_ids, parent_ids, starts, ends, attributes)
        return trace_ids, span_ids

    def flush(self) -> None:
        """Hand what was recorded to the processor (one queue operation for the whole batch)."""
        columns, self._columns = self._columns, self._new(self._scope, self._resource)
        if len(columns):
            self._processor.on_end_columns(columns)


class _SDKSpans:
    """The same spans through the SDK's tracer, for a provider other processors read too."""

    def __init__(self, rl):
        from opentelemetry.context import Context
        from opentelemetry.trace import set_span_in_context

        self._tracer = rl.tracer
        self._root = Context()
        self._child = set_span_in_context

    def spans(self, name: str, starts: list, ends: list, attributes: dict, parents=None, parent_of=None):
        keys = list(attributes)
        values = [  # content as ``structured`` lists (what SpanColumns takes): an SDK attribute is its JSON
            [encode(v, _CONTENT[key]) if v is not None else None for v in column]
            if key in _CONTENT
            else column
            for key, column in attributes.items()
        ]
        made = []
        for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
            fields = {
                key: column[i] for key, column in zip(keys, values, strict=True) if column[i] is not None
            }
            context = self._root if parents is None else self._child(parents[parent_of[i]], self._root)
            span = self._tracer.start_span(name, context=context, attributes=fields, start_time=start)
            span.end(end_time=end)
            made.append(span)
        return made

    def flush(self) -> None:
        pass


@dataclass(slots=True)  # made every round on the training thread: slots make it and its reads cheaper
class _Batch:
    """One generation round on this process: what TRL generated and scored, until its samples are consumed."""

    round: int
    policy_version: int
    start_ns: int
    inputs: list
    gen_start_ns: int | None = None
    gen_end_ns: int | None = None
    generated: tuple | None = None  # TRL's (prompt ids, completion ids, tool mask) lists, measured when built
    prompt_lengths: list = field(default_factory=list)
    completion_lengths: list = field(default_factory=list)
    segments: list = field(
        default_factory=list
    )  # per sample: [(is_model, tokens)] runs of TRL's tool/env mask
    calls: list = field(default_factory=list)  # (start_ns, end_ns) of each batched generate call, in order
    tool_calls: dict = field(default_factory=dict)  # sample -> [(name, start_ns, end_ns, failed)]
    truncated: list = field(default_factory=list)
    reward_start_ns: int | None = None
    reward_end_ns: int | None = None
    reward_calls: dict = field(default_factory=dict)  # reward function index -> (start_ns, end_ns)
    # the gathered rewards_per_func tensor, as a list of rows of floats (NaN: no score)
    rewards_cpu: list | None = None
    weights: list | None = None  # the trainer's reward_weights, likewise
    rewards_per_func: list | None = None  # this process's rows: [sample][function], None = no score
    texts: tuple | None = None  # (prompts, completions) as TRL gave them to its reward functions
    combined: list | None = None
    decisions: list | None = None
    rollout_ids: list = field(default_factory=list)
    uses: dict = field(default_factory=dict)  # local sample index -> micro-batches that trained on it
    first_step: dict = field(default_factory=dict)
    last_step: dict = field(default_factory=dict)
    end_ns: int | None = None
    global_offset: int = 0  # index of this process's first sample in the gathered batch


class TRLSpans:
    """The span building methods of ``TRLInstrumentation``, run on the adapter's thread: a round's rollouts,
    turns, tool calls, rewards and samples, a step and a weight sync, each from what the hooks recorded."""

    def _measure(self, b: _Batch) -> None:
        """The round's token counts from TRL's lists, as TRL counts them (on the adapter's thread): prompt and
        decoded tokens (only the model's, where a tool mask says which), the mask's runs, and whether each
        completion was clipped (its last token neither EOS nor padding: TRL's test for ``clipped_ratio``)."""
        prompt_ids, completion_ids, tool_mask = b.generated
        if self._eos_and_pad is None:
            self._eos_and_pad = {*self.trainer.eos_token_ids, self.trainer._tokenizer.pad_token_id}
        eos_and_pad = self._eos_and_pad
        b.prompt_lengths = [len(ids) for ids in prompt_ids]
        if tool_mask is not None:  # TRL counts only model-generated tokens
            b.completion_lengths = [int(sum(mask)) for mask in tool_mask]
            b.segments = [_runs(mask) for mask in tool_mask]
        else:
            b.completion_lengths = [len(ids) for ids in completion_ids]
            b.segments = [[(True, n)] for n in b.completion_lengths]
        b.truncated = [bool(len(ids)) and _last(ids) not in eos_and_pad for ids in completion_ids]
        b.generated = None  # TRL's lists are not held past this round's spans

    def _score(self, b: _Batch) -> None:
        """TRL's combined reward and sample decisions for this process's rows (on the adapter's thread)."""
        everything = np.asarray(b.rewards_cpu, dtype=np.float32).reshape(len(b.rewards_cpu), len(b.weights))
        weights = np.asarray(b.weights, dtype=np.float32)
        unscorable = np.isnan(everything).all(axis=1)
        decisions = _decisions(self.trainer, everything, weights, unscorable)
        combined = _nansum(everything * weights[None, :], axis=1)
        local = slice(b.global_offset, b.global_offset + len(b.inputs))
        b.rewards_per_func = [[None if v != v else v for v in row] for row in everything[local].tolist()]
        b.combined = [
            None if u else c
            for c, u in zip(combined[local].tolist(), unscorable[local].tolist(), strict=True)
        ]
        b.decisions = decisions[local]

    def _emit_samples(self, b: _Batch, now: int) -> None:
        trained = [i for i in range(len(b.rollout_ids)) if i in b.first_step]  # the others: training stopped
        if not trained:
            return
        steps = [b.first_step[i] for i in trained]
        attributes = {
            semconv.SAMPLE_USES: [b.uses[i] for i in trained],
            semconv.SAMPLE_LAST_STEP: [b.last_step[i] for i in trained],
            semconv.ROLLOUT_ID: [b.rollout_ids[i] for i in trained],
            _STEP: steps,
            _DECISION: [b.decisions[i] for i in trained],
            _STALENESS: [step - b.policy_version for step in steps],
            _SAMPLE_TOKENS: [b.prompt_lengths[i] + b.completion_lengths[i] for i in trained],
        }
        self._out.spans(semconv.SAMPLE, [b.end_ns] * len(trained), [now] * len(trained), attributes)
        self.counts["rl.sample"] += len(trained)

    def _emit_rollouts(self, b: _Batch) -> None:
        """The round's rollouts, then their turns and tool calls, then their rewards: a block of each."""
        self._measure(b)
        prefix = uuid.uuid4().hex[:24]
        b.rollout_ids = [f"{prefix}{i:04x}" for i in range(len(b.inputs))]
        self._score(b)
        t, n, ids = self.trainer, len(b.inputs), b.rollout_ids
        names = list(getattr(t, "reward_func_names", [])) or [
            f"reward_{j}" for j in range(len(b.rewards_per_func[0]))
        ]
        generations = int(getattr(t, "num_generations", 1) or 1)
        group = f"{self.rl.run_id}/r{b.round}/g"
        attributes = {
            semconv.ROLLOUT_ID: ids,
            _TASK: [_task_id(example) for example in b.inputs],
            _GROUP: [f"{group}{(b.global_offset + i) // generations}" for i in range(n)],
            _ENVIRONMENT: [_environment(example) for example in b.inputs],
            _VERSION: [b.policy_version] * n,
            _PROMPT: b.prompt_lengths[:n],
            _STATUS: [semconv.ROLLOUT_OK] * n,
            _SCORE: b.combined,
        }
        rollouts = self._out.spans(semconv.ROLLOUT, [b.start_ns] * n, [b.end_ns] * n, attributes)
        self._emit_turns(b, b.gen_start_ns or b.start_ns, b.gen_end_ns or b.end_ns, rollouts)
        times = [b.reward_calls.get(j, (b.reward_start_ns, b.reward_end_ns)) for j in range(len(names))]
        owner = [i for i in range(n) for _ in names]  # sample-major: sample i's functions in order
        attributes = {
            _REWARD_NAME: names * n,
            _SCORE: [value for row in b.rewards_per_func for value in row],  # None: no score from it
            semconv.ROLLOUT_ID: [ids[i] for i in owner],
        }
        starts, ends = [start for start, _ in times] * n, [end for _, end in times] * n
        self._out.spans(semconv.REWARD, starts, ends, attributes, rollouts, owner)
        self.counts["rl.rollout"] += n
        self.counts["rl.reward"] += n * len(names)

    def _emit_turns(self, b: _Batch, gen_start: int, gen_end: int, rollouts) -> None:
        """One ``rl.turn`` per model call of each sample, then the tool calls made between them; with TRL's own
        loop on transformers, each turn's prefix continuity (``_continuity``)."""
        reasons, timing, index, read, decoded_n, owner, starts, ends = [], [], [], [], [], [], [], []
        for i in range(len(b.inputs)):
            segments = b.segments[i] if i < len(b.segments) else [(True, b.completion_lengths[i])]
            if not any(is_model for is_model, _ in segments):
                segments = [(True, 0), *segments]
            decoded = [n for is_model, n in segments if is_model]
            timed = len(decoded) == 1 or len(b.calls) >= len(decoded)  # else a rollout_func made the calls
            cursor, total = gen_start, sum(n or 1 for n in decoded)
            context = b.prompt_lengths[i]  # what the model has read before this turn
            k = 0
            for is_model, n in segments:
                if not is_model:
                    context += n
                    continue
                last = k == len(decoded) - 1
                reasons.append((_LENGTH if b.truncated[i] else _STOP) if last else _TOOL_CALLS)
                if len(decoded) == 1:
                    start, end, apportioned = gen_start, gen_end, None
                elif timed:
                    (start, end), apportioned = b.calls[k], None
                else:
                    start, cursor = cursor, cursor + (gen_end - gen_start) * (n or 1) // total
                    end, apportioned = (gen_end if last else cursor), "apportioned"
                timing.append(apportioned)
                index.append(k)
                read.append(context)
                decoded_n.append(n)
                owner.append(i)
                starts.append(start)
                ends.append(end)
                context += n
                k += 1
        attributes = {
            **{name: [value] * len(owner) for name, value in self._limits.items()},
            FINISH_REASONS: reasons,
            TIMING: timing,
            _TURN: index,
            _INPUT: read,
            _OUTPUT: decoded_n,
            _VERSION: [b.policy_version] * len(owner),
            semconv.ROLLOUT_ID: [b.rollout_ids[i] for i in owner],
        }
        if not getattr(self.trainer, "use_vllm", False) and not any(timing):
            attributes.update(_continuity(index, read, decoded_n))
        if b.texts is not None:
            attributes[_INPUT_MESSAGES], attributes[_OUTPUT_MESSAGES] = _turn_messages(b.texts, owner, index)
        self._out.spans(semconv.TURN, starts, ends, attributes, rollouts, owner)
        self.counts["rl.turn"] += len(owner)
        for i in range(len(b.inputs)):
            for name, start, end, failed in b.tool_calls.get(i, ()):
                fields = dict(tool_name=name, tool_exit_code=1 if failed else 0)
                extra = {semconv.OPERATION_NAME: semconv.TOOL_PREFIX}
                one = _attributes(fields, extra, b.rollout_ids[i])
                span_name = f"{semconv.TOOL_PREFIX} {name}"
                self._out.spans(span_name, [start], [end], _columns(one), rollouts, [i])
                self.counts["execute_tool"] += 1

    def _emit_step_span(
        self,
        step: int,
        start: int,
        end: int,
        samples: int,
        tokens: int,
        taken: list,
        wait_s: float,
        signals: dict,
    ):
        """``tokens``: what was counted while training (the async trainer's samples); ``taken``: the rounds'
        samples whose tokens are counted here (their rounds were measured before, in ``_emit_rollouts``);
        ``signals``: what TRL logged about the update."""
        # a round that could not be measured (its rollouts' hook failed) adds none
        tokens += sum(
            b.prompt_lengths[i] + b.completion_lengths[i] for b, i in taken if i < len(b.completion_lengths)
        )
        fields = dict(
            train_step=step,
            policy_version=step + 1,
            train_samples=samples,
            train_tokens=tokens,
            train_wait_s=wait_s,
            **signals,
        )
        self._out.spans(semconv.TRAIN_STEP, [start], [end], _columns(_attributes(fields)))
        self.counts["rl.train_step"] += 1

    def _emit_sync(self, version: int, started: int, ended: int) -> None:
        attributes = _columns(_attributes(dict(policy_version=version)))
        self._out.spans(semconv.WEIGHT_SYNC, [started], [ended], attributes)
        self.counts["rl.weight_sync"] += 1


def _continuity(index: list, read: list, decoded: list) -> dict:
    """Prefix continuity of TRL's own turns generated with transformers: TRL builds each later prompt by
    concatenating token ids (the previous prompt, its completion and the tool results), so the history, the
    previous turn's prompt and completion, is an exact prefix; and transformers' ``generate`` keeps no cache
    between calls (nor shares a prompt among the group's copies), so every turn prefills all of it again:
    nothing cached, continuity broken by eviction on every later turn. (With vLLM the cache is the engine's,
    which TRL does not report: those turns record none of this.)"""
    history = [read[k - 1] + decoded[k - 1] if turn else None for k, turn in enumerate(index)]
    return {
        _CONTEXT: history,
        _PREFIX: history,
        _CACHED: [0] * len(index),
        _BREAK: ["evicted" if turn else None for turn in index],
    }


def _runs(mask) -> list[tuple[bool, int]]:
    """TRL's tool/env mask (1 = model token, 0 = tool or environment token) as runs: [(is_model, length)].
    In numpy: a mask has a completion's length (thousands of tokens in a tool-calling run), and a loop over it in
    Python cost ~0.1 us a token on the training thread."""
    values = np.asarray(mask, dtype=bool).ravel()
    if not values.size:
        return [(True, 0)]
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    lengths = np.diff(np.append(starts, values.size))
    return list(zip(values[starts].tolist(), lengths.tolist(), strict=True))


def _last(ids):
    last = ids[-1]
    return last.item() if hasattr(last, "item") else last


def _environment(example) -> str:
    if isinstance(example, dict):
        for column in ("environment", "task"):
            value = example.get(column)
            if isinstance(value, str) and value:
                return value
    return "default"


def _task_id(example) -> str | None:
    if not isinstance(example, dict):
        return None
    if example.get("task_id") is not None:
        return str(example["task_id"])
    prompt = example.get("prompt")
    if prompt is None:
        return None
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    if len(text) <= _TASK_ID_MAX:
        return text
    return f"{text[:200]}…#{hashlib.sha1(text.encode()).hexdigest()[:12]}"


# --- transcripts ---------------------------------------------------------------------------------------------


def _turn_messages(texts: tuple, owner: list, index: list) -> tuple[list, list]:
    """Each turn's ``gen_ai.input.messages`` and ``gen_ai.output.messages`` (``structured`` lists, not yet JSON: the
    writer reads them as they are, ``_SDKSpans`` writes their JSON): the sample's prompt is its first
    turn's input; its completion (text, or chat messages) is split at its assistant messages when there is one
    per turn, the messages before each being that turn's input; otherwise the last turn gets it whole."""
    prompts, completions = texts
    turns = Counter(owner)
    splits = {sample: _split_completion(completions[sample], n) for sample, n in turns.items()}
    inputs, outputs = [], []
    for sample, k in zip(owner, index, strict=True):
        split = splits[sample]
        if split is not None:
            given, reply = split[k]
            given = [*_as_list(prompts[sample]), *given] if k == 0 else given
            inputs.append(structured(given, "input") if given else None)
            outputs.append(structured(reply, "output"))
            continue
        inputs.append(structured(prompts[sample], "input") if k == 0 else None)
        outputs.append(structured(completions[sample], "output") if k == turns[sample] - 1 else None)
    return inputs, outputs


def _split_completion(completion, turns: int) -> list | None:
    """A chat completion as ``turns`` (input messages, assistant message) pairs, or None when it is not one
    assistant message per turn (text, or a loop that merged messages)."""
    if not isinstance(completion, list) or not all(isinstance(m, dict) for m in completion):
        return None
    pairs, given = [], []
    for message in completion:
        if message.get("role") == "assistant":
            pairs.append((given, message))
            given = []
        else:
            given.append(message)
    return pairs if len(pairs) == turns and not given else None


def _as_list(prompt) -> list:
    return prompt if isinstance(prompt, list) else [prompt]
