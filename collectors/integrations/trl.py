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

This module holds the hooks: what patches TRL's trainer and what they note on the training thread. What each
round, step and sync then becomes as spans, on the adapter's thread, is ``rollscope.integrations.trl_spans``
(TRL's sample decisions, recomputed, ``trl_decisions``); the hand-over between the two threads is
``rollscope.integrations.handover``, shared with the other adapters.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import time

from rollscope.integrations.handover import Handover, installed
from rollscope.integrations.trl_spans import (
    _CONTEXT_LENGTH,
    _MAX_TOKENS,
    FINISH_REASONS,
    TIMING,
    TRLSpans,
    _Batch,
    _SDKSpans,
)

__all__ = [
    "FINISH_REASONS",
    "HANDOFF_COMPLETIONS",
    "HANDOFF_SECONDS",
    "SIGNALS",
    "TIMING",
    "TRLInstrumentation",
    "instrument",
]

log = logging.getLogger("rollscope.integrations.trl")

_SAMPLE_KEY = "_rollscope_sample"  # rides along TRL's buffered batch; removed before compute_loss
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


class TRLInstrumentation(TRLSpans, Handover):
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

    def _emit_step(self, state) -> None:
        """The step's span waits for TRL's log of the step (``_logged``, right after on_step_end), which carries
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

    def _logged(self, state, logs: dict | None) -> None:
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
            inst._hook("train_step", inst._logged, state, logs)

        def on_train_end(self, args, state, control, **kwargs):
            inst._guard("train_end", inst._submit_step)
            inst._guard("train_end", inst._retire_buffer)
            inst._guard("train_end", inst._drain)
            inst._guard("train_end", inst.rl.force_flush)

    return RollscopeCallback()


def _finite(value) -> bool:
    """A logged figure worth recording: a real, finite number (TRL logs NaN for a mean of nothing)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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


def _reward_texts(args: tuple, kwargs: dict) -> tuple | None:
    """``(prompts, completions)`` from ``_calculate_rewards(inputs, prompts, completions, ...)``'s arguments."""
    prompts = kwargs.get("prompts", args[1] if len(args) > 1 else None)
    completions = kwargs.get("completions", args[2] if len(args) > 2 else None)
    return (prompts, completions) if prompts is not None and completions is not None else None
