"""TRL in one call: ``instrument(trainer, store="runs/", run_id="grpo-1")`` on an already-built ``GRPOTrainer``.

Nothing else in the training script changes. The adapter wraps some of the trainer's own methods on the
instance (generation and, where TRL runs tools, each model call and each tool; reward computation; batch
preparation; the vLLM weight sync when there is one) and adds a ``TrainerCallback``; from what they see it emits,
through the store exporter of ``attach()``:

* ``rl.rollout`` per completion: task = the prompt (or the dataset's ``task_id`` column), group = that prompt's
  ``num_generations`` completions of one generation round, environment = the dataset's ``environment`` column,
  else ``task``, else ``default``; policy version = optimizer steps completed when it was generated; status
  ``ok``; reward = TRL's combined reward (weighted sum over reward functions, absent when none scored it).
* ``rl.turn`` under it, one per model call: prompt tokens, decoded tokens counted as TRL counts them
  (tool-result tokens excluded), and ``gen_ai.response.finish_reasons`` = ``["length"]`` when the completion
  was clipped (its last token is neither EOS nor padding, TRL's test for ``completions/clipped_ratio``), else
  ``["stop"]``. A multi-turn completion (TRL's ``tools`` / ``environment_factory`` loop, or a ``rollout_func``
  returning ``env_mask``) is split where the mask says the model stopped and the environment spoke: turn k's
  prompt is the prompt plus everything before it, its decoded tokens are its own, earlier turns end in
  ``["tool_calls"]``. In TRL's tool loop each turn has the time of the batched generate call it came from;
  a ``rollout_func`` does its calls itself, so there the generation window is shared among its turns in
  proportion to their decoded tokens and the turn says so (``rollscope.turn.timing`` = ``"apportioned"``).
* the transcripts (``messages``, unless capture is off): each turn's input and output are the prompt and the
  completion TRL decoded, the very strings (or chat messages) its reward functions receive; a multi-turn chat
  completion is split at its assistant messages, the tool results before each one being that turn's input.
* ``execute_tool {name}`` per tool call TRL's tool loop made, with its own time, the sample it served, and
  ``rl.tool.exit_code`` 1 when the tool raised (TRL then feeds the error text back to the model).
* ``rl.reward`` per reward function with its value (a function returning ``None`` for a sample: a span with no
  score) and the function's own call time.
* ``rl.train_step`` per optimizer step: samples and tokens it trained on, seconds it waited for generation and
  scoring; ``rl.weight_sync`` where TRL pushes weights to vLLM.
* ``rl.sample`` per completion the trainer consumed, with TRL's semantics: ``unscored`` when every reward
  function returned ``None``, ``zero_signal`` when TRL's zero-std test (the one behind ``frac_reward_zero_std``)
  holds for it, ``used`` otherwise. A completion trained on in several optimizer steps (``num_iterations``,
  ``steps_per_generation``) gets one sample at its first step; ``rl.sample.uses`` and ``rl.sample.last_step``
  record the reuse.

It never changes training: it reads what the methods return and passes it on untouched (the one addition, a
per-sample index list riding along the buffered batch, is removed before the loss sees the batch), draws no
random numbers from any generator training uses, and any failure inside it is logged once per hook, counted in
``stats``, and never raised into training. On the training thread it only notes times, keeps a reference to
the lists of token ids TRL generated and copies the gathered reward tensor (about 0.1 ms a step on a small CPU,
the hooks' first lines after training's torch work being the dearest); everything else, down to counting the
tokens, is span work, built on its own thread (``rollscope-trl``), which gets that work in batches
(as often as the store publishes a segment, every 2 s by default, or once ``HANDOFF_COMPLETIONS`` wait) and is
drained when training ends, on ``close()``, and at interpreter exit. Training that never fills a hand-over never
starts that thread: its spans are built when it ends, on the training thread, which waits for them then anyway.

TRL's async GRPO trainer (``trl.experimental.async_grpo``) generates in another process and trains on what its
data loader takes from a queue: for it the adapter records each sample taken, stale ones included, and the
weight syncs (``rollscope.integrations.trl_async``), and train steps as above.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import math
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from rollscope import semconv
from rollscope.collectors.content import encode
from rollscope.collectors.spans import CONTENT_FIELDS, attributes_from_fields
from rollscope.integrations.handover import Handover, installed

log = logging.getLogger("rollscope.integrations.trl")

_SAMPLE_KEY = "_rollscope_sample"  # rides along TRL's buffered batch; removed before compute_loss
_TASK_ID_MAX = 1000
TIMING = "rollscope.turn.timing"  # "apportioned": the turn's times are a share of the generation window
# A turn's finish reasons, one tuple each (the SDK keeps a sequence attribute as a tuple).
_STOP, _LENGTH, _TOOL_CALLS = ("stop",), ("length",), ("tool_calls",)
# Span work reaches the adapter's thread in batches: as often as the store exporter publishes a segment (its
# ``segment_seconds``, 2 s by default: handing spans over sooner would not put them on disk sooner; counted from the
# first item, not from ``instrument()``, as TRL's set-up takes a while), or once HANDOFF_COMPLETIONS completions wait
# (each keeps TRL's lists of token ids alive until its spans are built: the bound on that memory). Each hand-over
# wakes that thread, which then takes the GIL from training (torch's eager ops hold it) and disturbs torch's intra-op
# threads on a small machine: measured, three hand-overs a step (one per round, one per step, one per retired round)
# cost the tiny CPU run several times the CPU the spans themselves take, and the one hand-over a second of before (it
# came in the tiny run's last steps, starting the adapter's and the exporter's threads) about +12 ms of its ~1 s (the
# steps +18.0 ms with it in 150 pairs, +5.9 ms without in 100 pairs of the same hour; the end of training, which then
# builds every span, +12.2 ms against +10.0; docs/benchmarks.md). A count of items (64, before) handed the 50-step
# tiny run over twice, at steps 21 and 43, each costing the step it came in +5 to +7 ms: a run whose steps take
# less than the interval in all now hands over only when training ends. A round's completions count twice (once
# generated, once consumed), any other item once.
HANDOFF_SECONDS = 2.0  # when the exporter does not say
HANDOFF_COMPLETIONS = 2048
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
_MAX_TOKENS, _CONTEXT_LENGTH = _NAME["max_tokens"], _NAME["context_length"]
# What TRL logs about each update (its trainer's ``log``, every ``logging_steps``), and the rl.train_step column
# each lands in (docs/semconv.md, "Training signals").
SIGNALS = {
    "loss": "train_loss",
    "entropy": "train_entropy",
    "kl": "train_kl",
    "clip_ratio/region_mean": "train_clip_fraction",
    "grad_norm": "train_grad_norm",
    "learning_rate": "train_learning_rate",
}


def instrument(trainer, store=None, run_id: str | None = None, **attach_kwargs) -> TRLInstrumentation:
    """Instrument a built ``trl.GRPOTrainer`` (or ``trl.experimental``'s ``AsyncGRPOTrainer``); returns the
    handle (``.rl``, ``.stats``, ``.close()``).

    ``store`` and ``run_id`` (and any other keyword) go to ``rollscope.attach``; a bad store or run id fails
    here, before training starts, as does something that is not a trainer (``TypeError``). Calling it twice
    on one trainer returns the first handle.
    """
    existing = getattr(trainer, "_rollscope_instrumentation", None)
    if existing is not None:
        return existing
    if not callable(getattr(trainer, "add_callback", None)):  # before attach(): nothing written for a mistake
        raise TypeError(
            f"instrument() takes a built trl.GRPOTrainer (a transformers Trainer), not {type(trainer).__name__}"
        )
    attach_kwargs.setdefault("role", "train")
    attach_kwargs.setdefault("algorithm", "grpo")
    attach_kwargs.setdefault("set_global", False)  # the job's own tracing stays as it was
    for key, value in _describe(trainer).items():
        attach_kwargs.setdefault(key, value)
    return installed(TRLInstrumentation, trainer, store, run_id, attach_kwargs)


def _limits(trainer) -> dict:
    """The limits a completion is generated under (docs/semconv.md, "Truncation"): TRL's max_completion_length
    as each turn's response limit, and vLLM's max_model_len as the context length where TRL sets it."""
    out = {}
    try:
        limit = getattr(trainer, "max_completion_length", None)
        if isinstance(limit, int) and limit > 0:
            out[_MAX_TOKENS] = limit
        context = getattr(trainer.args, "vllm_max_model_length", None)
        if getattr(trainer, "use_vllm", False) and isinstance(context, int) and context > 0:
            out[_CONTEXT_LENGTH] = context
    except Exception:
        log.debug("rollscope: could not read the generation limits", exc_info=True)
    return out


def _describe(trainer) -> dict:
    out = {}
    try:
        model = trainer.model
        name = getattr(getattr(model, "config", None), "_name_or_path", None)
        if name:
            out["model_name"] = str(name)
        from transformers.trainer_pt_utils import get_model_param_count

        # The Trainer's own count: under DeepSpeed ZeRO-3 the model is partitioned when loaded, and a
        # parameter's numel() is its shard's (0); HF counts ds_numel there.
        out["model_parameters"] = int(get_model_param_count(model))
        device = getattr(trainer.accelerator, "device", None)
        out["devices"] = 1.0 if getattr(device, "type", "cpu") not in ("cpu", "mps") else 0.0
        from rollscope.integrations.trl_async import is_async_grpo

        if is_async_grpo(trainer):  # its loader drops samples more than max_staleness versions old: the bound
            out["staleness_bound"] = int(trainer.args.max_staleness)
    except Exception:
        log.debug("rollscope: could not describe the model", exc_info=True)
    return out


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
        keys, values = list(attributes), list(attributes.values())
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


class TRLInstrumentation(Handover):
    """The hooks on one trainer. ``stats``: spans emitted per kind, failures per hook, seconds the adapter's
    bookkeeping took on the training thread (wall, and CPU: the per-step hooks' wall time, as they never wait,
    ``_hook``; the end of training's from the thread's CPU clock), CPU seconds its span thread took, and the
    store exporter's counters."""

    label = "TRL"
    thread_name = "rollscope-trl"
    _log = log

    @property
    def _handoff_completions(self) -> int:  # read at each hand-over: a test lowers the module's bound
        return HANDOFF_COMPLETIONS

    def __init__(self, trainer, rl, out=None):
        super().__init__(rl, out or _SDKSpans(rl), HANDOFF_SECONDS)  # where spans go: _Columns or _SDKSpans
        self.trainer = trainer
        self._round = 0
        self._batch: _Batch | None = None  # the round being generated / scored
        self._buffer: _Batch | None = None  # the round whose samples the trainer is consuming
        self._step_start_ns: int | None = None
        self._ended_step: tuple | None = None  # the step ended, its span's figures, until TRL logs it
        self._limits = _limits(trainer)  # the token limits every turn carries
        self._step_wait_s = 0.0
        self._step_samples = 0
        self._step_tokens = 0
        self._step_taken: list = []  # (_Batch, sample) the step trained on: tokens counted when it is built
        self._eos_and_pad: set | None = None
        self._async = None  # AsyncSamples, for trl.experimental's async GRPO trainer

    # --- installing ---------------------------------------------------------------------------------------

    def install(self) -> None:
        t = self.trainer
        from rollscope.integrations.trl_async import AsyncSamples, is_async_grpo

        # The async trainer generates elsewhere: what it takes from its rollout queue, and its train steps.
        if is_async_grpo(t):
            self._async = AsyncSamples(self)
            self._async.install()
            t.add_callback(_callback(self))
            return
        missing = []
        for name, wrapper in (
            ("_generate_and_score_completions", self._wrap_generate_and_score),
            ("_generate", self._wrap_generate),
            ("_calculate_rewards", self._wrap_calculate_rewards),
            ("_prepare_inputs", self._wrap_prepare_inputs),
        ):
            original = getattr(t, name, None)
            if original is None:
                missing.append(name)
                continue
            setattr(t, name, wrapper(original))
        # Multi-turn generation (TRL's tool loop): optional, a TRL without them records one turn per completion.
        for name, wrapper in (
            ("_generate_single_turn", self._wrap_generate_single_turn),
            ("_tool_call_loop", self._wrap_tool_call_loop),
        ):
            original = getattr(t, name, None)
            if original is not None:
                setattr(t, name, wrapper(original))
        funcs = getattr(t, "reward_funcs", None)
        if isinstance(funcs, list):
            for i, func in enumerate(funcs):
                if callable(func) and not _is_module(func):
                    funcs[i] = self._wrap_reward_func(i, func)
        # Every rank calls it (in server mode the others take part in gathering the weights the main one sends;
        # colocated, each loads its own engine, all at once): one sync of the policy, recorded by the main rank,
        # as the async trainer's is, so its time is not counted once per rank.
        sync = getattr(getattr(t, "vllm_generation", None), "sync_weights", None)
        if sync is not None and getattr(getattr(t, "accelerator", None), "is_main_process", True):
            t.vllm_generation.sync_weights = self._wrap_sync(sync, lambda: t.state.global_step)
        t.add_callback(_callback(self))
        if missing:
            log.warning(
                "rollscope: %s has no %s; rollouts and samples are not recorded, train steps are",
                type(t).__name__,
                ", ".join(missing),
            )

    def close(self) -> None:
        """Record the step and the samples still buffered, then what ``Handover.close`` does."""
        if not self._closed:
            self._guard("close", self._submit_step)
            self._guard("close", self._retire_buffer)
        super().close()

    def _training(self) -> bool:
        model = getattr(self.trainer, "model", None)
        return bool(getattr(model, "training", False))

    # --- wrappers around the trainer's methods -------------------------------------------------------------

    def _wrap_generate_and_score(self, original):
        @functools.wraps(original)
        def generate_and_score(inputs, *args, **kwargs):
            if not self._training():
                return original(inputs, *args, **kwargs)
            started = time.time_ns()
            self._hook("generate", self._begin_batch, inputs, started)
            try:
                output = original(inputs, *args, **kwargs)
            finally:
                batch, self._batch = self._batch, None
            ended = time.time_ns()
            self._step_wait_s += (ended - started) / 1e9
            if batch is not None:
                self._hook("generate", self._finish_batch, batch, ended, output)
            return output

        return generate_and_score

    def _wrap_generate(self, original):
        @functools.wraps(original)
        def generate(prompts, *args, **kwargs):
            started = time.time_ns()
            result = original(prompts, *args, **kwargs)
            if self._batch is not None:
                self._hook("generate", self._record_generation, result, started, time.time_ns())
            return result

        return generate

    def _wrap_generate_single_turn(self, original):
        @functools.wraps(original)
        def generate_single_turn(*args, **kwargs):
            started = time.time_ns()
            result = original(*args, **kwargs)
            if self._batch is not None:
                self._batch.calls.append((started, time.time_ns()))
            return result

        return generate_single_turn

    def _wrap_tool_call_loop(self, original):
        @functools.wraps(original)
        def tool_call_loop(*args, **kwargs):
            if self._batch is not None:
                self._hook("tools", self._wrap_tools, self._batch)
            return original(*args, **kwargs)

        return tool_call_loop

    def _wrap_tools(self, batch: _Batch) -> None:
        """Time every tool call of this round: TRL builds one tool table per sample, so we know whose call it is."""
        t = self.trainer
        for i, table in enumerate(getattr(t, "_sync_tool_dicts", None) or []):
            for name, tool in list(table.items()):
                table[name] = self._timed_tool(batch, i, name, tool)
        for i, table in enumerate(getattr(t, "_async_tool_dicts", None) or []):
            for name, tool in list(table.items()):
                table[name] = self._timed_tool(batch, i, name, tool, asynchronous=True)

    def _timed_tool(self, batch: _Batch, sample: int, name: str, tool, asynchronous: bool = False):
        def record(started: int, failed: bool) -> None:
            batch.tool_calls.setdefault(sample, []).append((name, started, time.time_ns(), failed))

        if asynchronous:

            @functools.wraps(tool)
            async def timed_async(*args, **kwargs):
                started, failed = time.time_ns(), True
                try:
                    result = await tool(*args, **kwargs)
                    failed = False
                    return result
                finally:
                    self._hook("tools", record, started, failed)

            return timed_async

        @functools.wraps(tool)
        def timed(*args, **kwargs):
            started, failed = time.time_ns(), True
            try:
                result = tool(*args, **kwargs)
                failed = False
                return result
            finally:
                self._hook("tools", record, started, failed)

        return timed

    def _wrap_calculate_rewards(self, original):
        @functools.wraps(original)
        def calculate_rewards(*args, **kwargs):
            started = time.time_ns()
            result = original(*args, **kwargs)
            if self._batch is not None:
                self._hook("reward", self._record_rewards, result, started, time.time_ns(), args, kwargs)
            return result

        return calculate_rewards

    def _wrap_reward_func(self, index: int, func):
        def record(started):
            if self._batch is not None:
                self._batch.reward_calls[index] = (started, time.time_ns())

        if _is_async(func):

            @functools.wraps(func)
            async def reward_async(*args, **kwargs):
                started = time.time_ns()
                try:
                    return await func(*args, **kwargs)
                finally:
                    self._hook("reward", record, started)

            return reward_async

        @functools.wraps(func)
        def reward(*args, **kwargs):
            started = time.time_ns()
            try:
                return func(*args, **kwargs)
            finally:
                self._hook("reward", record, started)

        return reward

    def _wrap_prepare_inputs(self, original):
        @functools.wraps(original)
        def prepare_inputs(*args, **kwargs):
            inputs = original(*args, **kwargs)
            if isinstance(inputs, dict) and _SAMPLE_KEY in inputs:
                tags = inputs[_SAMPLE_KEY]
                inputs = {k: v for k, v in inputs.items() if k != _SAMPLE_KEY}
                self._hook("samples", self._consume, tags)
            return inputs

        return prepare_inputs

    def _wrap_sync(self, original, version):
        """A weight sync, timed; ``version()`` says which policy version it published (read after it ran)."""

        @functools.wraps(original)
        def sync_weights(*args, **kwargs):
            started = time.time_ns()
            result = original(*args, **kwargs)
            self._hook("weight_sync", self._synced, version, started, time.time_ns())
            return result

        return sync_weights

    def _synced(self, version, started: int, ended: int) -> None:
        self._submit("weight_sync", self._emit_sync, int(version()), started, ended)

    # --- bookkeeping --------------------------------------------------------------------------------------

    def _begin_batch(self, inputs, started: int) -> None:
        self._retire_buffer()
        self._batch = _Batch(
            round=self._round,
            policy_version=int(self.trainer.state.global_step),
            start_ns=started,
            inputs=list(inputs),
        )
        self._round += 1

    def _record_generation(self, result, started: int, ended: int) -> None:
        """The round's generation window and TRL's own lists of token ids, kept as they are: measuring them
        (``_measure``) is span work, done where the spans are built rather than here, between two of
        training's torch calls (there, with the CPU's caches full of training's data, the few lines cost
        ~40 us a round on the tiny CPU run, and a tool-calling round's masks far more). The lists live until
        the round's spans are built: at most a hand-over interval (2 s) or ``HANDOFF_COMPLETIONS`` later."""
        b = self._batch
        b.gen_start_ns, b.gen_end_ns = started, ended
        b.generated = (result[0], result[1], result[2])

    def _record_rewards(self, rewards_per_func, started: int, ended: int, args=(), kwargs=None) -> None:
        b = self._batch
        b.reward_start_ns, b.reward_end_ns = started, ended
        if self.rl.capture:  # references to TRL's own lists, read where the spans are built
            b.texts = _reward_texts(args, kwargs or {})
        # One torch call each (the values, exactly: float32 and bfloat16 are exact as Python floats, and _score
        # reads them back as float32, as TRL computes): a copy, as TRL goes on with the tensor.
        b.rewards_cpu = rewards_per_func.detach().tolist()
        b.weights = self.trainer.reward_weights.detach().tolist()
        b.global_offset = self.trainer.accelerator.process_index * len(b.inputs)

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

    def _finish_batch(self, batch: _Batch, ended: int, output) -> None:
        """The round is generated and scored: its spans are due, and each of its samples is tagged in the
        batch TRL buffers (``_SAMPLE_KEY``), to be told which step trains on it (``_consume``)."""
        if batch.rewards_cpu is None or batch.generated is None:
            return  # a path we do not understand (e.g. a trainer subclass): record nothing half-made
        batch.end_ns = ended
        self._buffer = batch
        self._submit("generate", self._emit_rollouts, batch, completions=len(batch.inputs))
        if isinstance(output, dict):
            output[_SAMPLE_KEY] = [(batch.round, i) for i in range(len(batch.inputs))]

    def _consume(self, tags) -> None:
        b = self._buffer
        step = int(self.trainer.state.global_step)
        for round_, i in tags:
            if b is None or round_ != b.round:
                continue
            b.uses[i] = b.uses.get(i, 0) + 1
            b.first_step.setdefault(i, step)
            b.last_step[i] = step
            self._step_samples += 1
            self._step_taken.append((b, i))  # its tokens: counted when the step's span is built

    def _retire_buffer(self) -> None:
        """The buffered round is done with: its samples (what the trainer consumed) go to the span thread."""
        if self._async is not None:
            self._async.retire()
        b, self._buffer = self._buffer, None
        if b is not None:
            self._submit("samples", self._emit_samples, b, time.time_ns(), completions=len(b.inputs))

    # --- spans (on the adapter's thread) ------------------------------------------------------------------

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
            _STATUS: ["ok"] * n,
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
            semconv.FINISH_REASONS: reasons,
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

    def _emit_step(self, state) -> None:
        """The step's span waits for TRL's log of the step (``_log``, right after on_step_end), which carries
        what the update measured; a step TRL does not log goes when the next begins or training ends."""
        if self._step_start_ns is None:
            return
        self._submit_step()
        step = int(state.global_step) - 1
        figures = (self._step_samples, self._step_tokens, self._step_taken, self._step_wait_s)
        self._ended_step = (step, self._step_start_ns, time.time_ns(), *figures)
        self._step_start_ns = None
        self._step_taken = []  # handed over with the step: from here the span's builder reads that list
        if self._async is not None:  # its counts run from one step's end to the next's
            self._step_counts_reset()
            self._async.retire()

    def _log(self, state, logs: dict | None) -> None:
        """TRL's log of the step that just ended: its signals (``SIGNALS``) go on that step's span, as logged.
        With ``logging_steps`` > 1 TRL logs a mean over the steps since its last log, on the step it logs at;
        the steps between carry none. Its last log (train_runtime ...) comes after the step's and adds nothing."""
        ended = self._ended_step
        if ended is None or not logs or int(state.global_step) - 1 != ended[0]:
            return
        signals = {column: float(logs[name]) for name, column in SIGNALS.items() if _finite(logs.get(name))}
        self._submit_step(signals)

    def _submit_step(self, signals: dict | None = None) -> None:
        ended, self._ended_step = self._ended_step, None
        if ended is not None:
            self._submit("train_step", self._emit_step_span, *ended, signals or {})

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

    def _step_begin(self) -> None:
        self._submit_step()  # a step TRL did not log (logging_steps > 1)
        self._step_start_ns = time.time_ns()
        if self._async is None:  # the async trainer's loader takes a step's samples before the step begins
            self._step_counts_reset()

    def _step_counts_reset(self) -> None:
        self._step_wait_s = 0.0
        self._step_samples = 0
        self._step_tokens = 0
        self._step_taken = []


def _callback(inst: TRLInstrumentation):
    from transformers import TrainerCallback

    class RollscopeCallback(TrainerCallback):
        """Train steps from the trainer's own step events; samples and a flush when training ends."""

        def on_step_begin(self, args, state, control, **kwargs):
            inst._hook("train_step", inst._step_begin)

        def on_step_end(self, args, state, control, **kwargs):
            inst._hook("train_step", inst._emit_step, state)

        def on_log(self, args, state, control, logs=None, **kwargs):
            inst._hook("train_step", inst._log, state, logs)

        def on_train_end(self, args, state, control, **kwargs):
            inst._guard("train_end", inst._submit_step)
            inst._guard("train_end", inst._retire_buffer)
            inst._guard("train_end", inst._drain)
            inst._guard("train_end", inst.rl.force_flush)

    return RollscopeCallback()


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


def _decisions(trainer, rewards_per_func, weights, unscorable) -> list[str]:
    """TRL's own tests, on the gathered rewards: every function None → unscored; zero std → zero_signal.

    The arithmetic of ``GRPOTrainer._generate_and_score_completions`` and ``trl.trainer.utils.nanstd`` (mean,
    Bessel-corrected std ignoring NaN, ``torch.isclose(std, 0)``), in float32 as TRL computes it, on numpy:
    a round's rewards are a few dozen numbers, for which each torch call costs more than the arithmetic (the
    torch version took ~0.6 ms of CPU a round beside training, numpy's nan-functions ~0.1 ms, their arithmetic
    spelt out in ufuncs ~25 µs)."""
    n_funcs = rewards_per_func.shape[1]
    generations = int(trainer.num_generations)
    aggregation = getattr(trainer, "multi_objective_aggregation", "sum_then_normalize")
    scale = getattr(trainer, "scale_rewards", "group")
    with np.errstate(invalid="ignore", divide="ignore"):  # the mean of an all-NaN group is NaN, as in torch
        if aggregation == "normalize_then_sum":
            grouped = rewards_per_func.reshape(-1, generations, n_funcs)
            mean_k = _nanmean(grouped, axis=1)[0]
            std_k = _nanstd(grouped, axis=1) if generations > 1 else np.zeros_like(mean_k)
            normalized = ((grouped - mean_k) / (std_k + np.float32(1e-4))).reshape(-1, n_funcs)
            rewards = _nansum(normalized * weights[None, :], axis=1)
            rewards[unscorable] = np.nan
            std = (
                np.broadcast_to(_nanstd(rewards), rewards.shape)
                if rewards.size > 1
                else np.zeros_like(rewards)
            )
        else:
            rewards = _nansum(rewards_per_func * weights[None, :], axis=1)
            rewards[unscorable] = np.nan
            if scale == "batch":
                std = (
                    np.broadcast_to(_nanstd(rewards), rewards.shape)
                    if rewards.size > 1
                    else np.zeros_like(rewards)
                )
            elif generations > 1:
                std = np.repeat(_nanstd(rewards.reshape(-1, generations), axis=1).ravel(), generations)
            else:
                std = np.zeros_like(rewards)
    # torch.isclose(std, 0) with its defaults (rtol 1e-5, atol 1e-8) is |std| <= 1e-8, NaN never close; spelt
    # out, as np.isclose computes it (in float64): np.isclose itself costs ~40 us on a few numbers.
    zero = (np.abs(np.asarray(std, dtype=np.float64)) <= 1e-8).tolist()
    return [
        "unscored" if u else "zero_signal" if z else "used"
        for u, z in zip(unscorable.tolist(), zero, strict=True)
    ]


def _finite(value) -> bool:
    """A logged figure worth recording: a real, finite number (TRL logs NaN for a mean of nothing)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _nanstd(values, axis=None):
    """``trl.trainer.utils.nanstd`` in numpy (keepdims): Bessel-corrected, NaN ignored, NaN below 2 values."""
    nan = np.isnan(values)
    mean, count = _nanmean(values, axis, nan)
    variance = _nanmean((values - mean) ** 2, axis, nan)[0]  # NaN where ``values`` is: the same mask
    correction = np.where(count > 1, count / np.maximum(count - 1, 1), np.nan).astype(values.dtype)
    return np.sqrt(variance * correction)


def _nanmean(values, axis=None, nan=None):
    """``np.nanmean(values, axis, keepdims=True)`` and the count of values it averaged: its arithmetic (a sum
    in the values' type, divided by the count in float64 and rounded back), without its layers of Python."""
    nan = np.isnan(values) if nan is None else nan
    total = np.add.reduce(np.where(nan, values.dtype.type(0), values), axis=axis, keepdims=True)
    count = np.add.reduce(~nan, axis=axis, keepdims=True, dtype=np.intp)
    return np.true_divide(total, count, out=total, casting="unsafe"), count


def _nansum(values, axis):
    """``np.nansum``: NaN counted as 0, summed in the values' type."""
    return np.add.reduce(np.where(np.isnan(values), values.dtype.type(0), values), axis=axis)


def _is_module(func) -> bool:
    try:
        from torch import nn
    except ImportError:
        return False
    return isinstance(func, nn.Module)


def _is_async(func) -> bool:
    """TRL's own test where it has one (it decides which call path a reward function takes)."""
    try:
        from trl.trainer.utils import is_async_callable

        return bool(is_async_callable(func))
    except ImportError:
        return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


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


def _reward_texts(args: tuple, kwargs: dict) -> tuple | None:
    """``(prompts, completions)`` from ``_calculate_rewards(inputs, prompts, completions, ...)``'s arguments."""
    prompts = kwargs.get("prompts", args[1] if len(args) > 1 else None)
    completions = kwargs.get("completions", args[2] if len(args) > 2 else None)
    return (prompts, completions) if prompts is not None and completions is not None else None


def _turn_messages(texts: tuple, owner: list, index: list) -> tuple[list, list]:
    """Each turn's ``gen_ai.input.messages`` and ``gen_ai.output.messages``: the sample's prompt is its first
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
            inputs.append(encode(given, "input") if given else None)
            outputs.append(encode(reply, "output"))
            continue
        inputs.append(encode(prompts[sample], "input") if k == 0 else None)
        outputs.append(encode(completions[sample], "output") if k == turns[sample] - 1 else None)
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
