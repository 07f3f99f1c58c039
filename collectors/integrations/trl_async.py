"""TRL's async GRPO trainer (``trl.experimental.async_grpo.AsyncGRPOTrainer``): its samples as the trainer takes
them. ``rollscope.integrations.trl.instrument`` uses this when given that trainer; nothing to call here.

The async trainer does not generate: a rollout worker (another process, against a vLLM server) generates,
scores and computes advantages, and puts finished ``RolloutSample``s on a queue (``trainer.rollout_queue``).
The trainer's data loader (``RolloutQueueDataset``) takes them one at a time and drops a sample whose policy is
more than ``max_staleness`` versions behind the trainer's (``model_version``), with a log line and a counter
(``sample/dropped_stale_total``). So the adapter wraps that queue as the trainer holds it: on the training
thread each sample taken is noted (a tuple appended) with the trainer's version at that moment, and its spans
are built on the adapter's thread, handed over as for ``GRPOTrainer``:

* ``rl.rollout`` per sample: task = its prompt, group = TRL's ``group_id``, environment ``default`` (a sample
  carries no dataset columns), policy version = the ``model_version`` it was generated with, reward = TRL's
  combined reward (``metrics["reward"]``; absent when NaN, i.e. no function scored it). The worker does not
  say when it generated: the rollout spans from when the sample was queued (``enqueued_at``) to when the
  trainer took it.
* ``rl.turn`` under it, one per model turn: ``completion_mask``'s runs of 1 (tokens the model wrote, trained
  on) between runs of 0 (context: tool results, or the earlier conversation of a forked row); decoded tokens
  as TRL counts them (``completion_mask.sum()``), prompt tokens = what precedes the turn.
* ``rl.reward`` per ``rewards/<name>`` in its metrics (NaN: no score from that function).
* ``rl.sample`` with TRL's decision when it was taken: ``stale`` when ``model_version - sample.model_version >
  max_staleness`` (the loader's own test, on the same values: the samples it drops), ``unscored`` when its
  reward is NaN, ``zero_signal`` when its group's reward spread (``reward_std``) is zero (TRL's advantage is
  then 0 for the whole group), ``used`` otherwise; staleness = that version difference.
* ``rl.weight_sync`` per ``_sync_weight``, with the version it published.
* ``rl.train_step`` (the shared callback) counts the samples and tokens taken during the step (the loader
  fetches a batch ahead, so a step's count can include the next batch's) and the seconds the loader waited
  on the queue (TRL's ``perf/rollout_wait_s``).
"""

from __future__ import annotations

import math
import time
import uuid

import numpy as np

from rollscope import semconv
from rollscope.integrations.trl_spans import (
    _DECISION,
    _ENVIRONMENT,
    _GROUP,
    _INPUT,
    _OUTPUT,
    _REWARD_NAME,
    _SAMPLE_TOKENS,
    _SCORE,
    _STALENESS,
    _STATUS,
    _STEP,
    _TASK,
    _TURN,
    _VERSION,
    _runs,
    _task_id,
)

# The worker's per-function rewards in a sample's metrics: rewards/<function name>.
_REWARD_PREFIX = "rewards/"


def is_async_grpo(trainer) -> bool:
    """The async trainer's shape: a rollout queue and a policy version, no generation of its own."""
    return (
        hasattr(trainer, "rollout_queue")
        and hasattr(trainer, "model_version")
        and not hasattr(trainer, "_generate_and_score_completions")
    )


class AsyncSamples:
    """The samples one instrumented async trainer takes, until they are handed to the adapter's thread."""

    def __init__(self, inst):
        self._inst = inst
        self._trainer = inst.trainer
        self._taken: list = []  # (sample, taken_ns, trainer's version, step, stale) since the last hand-over
        self._prefix = uuid.uuid4().hex[:16]  # rollout ids: this prefix and a count
        self._made = 0

    def install(self) -> None:
        t = self._trainer
        if t.rollout_queue is None:  # not the main rank: only that one takes samples and counts versions
            return
        t.rollout_queue = _TakenFrom(t.rollout_queue, self)
        sync = getattr(t, "_sync_weight", None)
        if sync is not None:
            t._sync_weight = self._inst._wrap_sync(sync, lambda: t.model_version)

    def retire(self) -> None:
        """Hand what was taken since the last time to the adapter's thread (at each step's end and at the end)."""
        taken, self._taken = self._taken, []
        if taken:
            self._inst._submit("samples", self._emit, taken, completions=len(taken))

    # --- on the training thread -----------------------------------------------------------------------------

    def taken(self, sample) -> None:
        t, inst = self._trainer, self._inst
        version = int(t.model_version)
        stale = version - int(sample.model_version) > int(t.args.max_staleness)
        self._taken.append((sample, time.time_ns(), version, int(t.state.global_step), stale))
        if not stale:
            inst._step_samples += 1
            inst._step_tokens += len(sample.input_ids)

    # --- spans (on the adapter's thread) --------------------------------------------------------------------

    def _emit(self, taken: list) -> None:
        inst, out, n = self._inst, self._inst._out, len(taken)
        ids = [f"{self._prefix}{self._made + i:08x}" for i in range(n)]
        self._made += n
        samples = [entry[0] for entry in taken]
        ends = [entry[1] for entry in taken]
        starts = [_ns(getattr(s, "enqueued_at", None), end) for s, end in zip(samples, ends, strict=True)]
        metrics = [getattr(s, "metrics", None) or {} for s in samples]
        rewards = [_number(m.get("reward")) for m in metrics]
        attributes = {
            semconv.ROLLOUT_ID: ids,
            _TASK: [_task_id({"prompt": s.prompt}) for s in samples],
            _GROUP: [f"{inst.rl.run_id}/g{s.group_id}" for s in samples],
            _ENVIRONMENT: ["default"] * n,
            _VERSION: [int(s.model_version) for s in samples],
            _STATUS: ["ok"] * n,
            _SCORE: rewards,
        }
        rollouts = out.spans(semconv.ROLLOUT, starts, ends, attributes)
        inst.counts["rl.rollout"] += n
        self._emit_turns(samples, starts, ends, ids, rollouts)
        self._emit_rewards(metrics, starts, ends, ids, rollouts)
        decisions = [
            "stale" if stale else "unscored" if reward is None else "zero_signal" if _flat(m) else "used"
            for (_, _, _, _, stale), reward, m in zip(taken, rewards, metrics, strict=True)
        ]
        attributes = {
            semconv.SAMPLE_USES: [1] * n,
            semconv.SAMPLE_LAST_STEP: [entry[3] for entry in taken],
            semconv.ROLLOUT_ID: ids,
            _STEP: [entry[3] for entry in taken],
            _DECISION: decisions,
            _STALENESS: [entry[2] - int(s.model_version) for entry, s in zip(taken, samples, strict=True)],
            _SAMPLE_TOKENS: [len(s.input_ids) for s in samples],
        }
        out.spans(semconv.SAMPLE, ends, ends, attributes)
        inst.counts["rl.sample"] += n

    def _emit_turns(self, samples, starts, ends, ids, rollouts) -> None:
        index, read, decoded, owner = [], [], [], []
        for i, s in enumerate(samples):
            mask = np.asarray(s.completion_mask, dtype=bool).ravel()
            first = int(mask.argmax()) if mask.any() else mask.size  # tokens before the model's first
            context, k = first, 0
            for is_model, length in _runs(mask[first:]):
                if is_model:
                    index.append(k)
                    read.append(context)
                    decoded.append(length)
                    owner.append(i)
                    k += 1
                context += length
        attributes = {
            _TURN: index,
            _INPUT: read,
            _OUTPUT: decoded,
            _VERSION: [int(samples[i].model_version) for i in owner],
            semconv.ROLLOUT_ID: [ids[i] for i in owner],
        }
        times = ([starts[i] for i in owner], [ends[i] for i in owner])
        self._inst._out.spans(semconv.TURN, *times, attributes, rollouts, owner)
        self._inst.counts["rl.turn"] += len(owner)

    def _emit_rewards(self, metrics, starts, ends, ids, rollouts) -> None:
        names, scores, owner = [], [], []
        for i, m in enumerate(metrics):
            for key, value in m.items():
                if key.startswith(_REWARD_PREFIX):
                    names.append(key[len(_REWARD_PREFIX) :])
                    scores.append(_number(value))
                    owner.append(i)
        if not owner:
            return
        attributes = {_REWARD_NAME: names, _SCORE: scores, semconv.ROLLOUT_ID: [ids[i] for i in owner]}
        times = ([starts[i] for i in owner], [ends[i] for i in owner])
        self._inst._out.spans(semconv.REWARD, *times, attributes, rollouts, owner)
        self._inst.counts["rl.reward"] += len(owner)


class _TakenFrom:
    """The rollout queue as the trainer's data loader sees it: ``get`` tells ``AsyncSamples`` what it took and
    how long it waited (a wait that ends empty, the loader's poll, counts too); the rest is the worker's queue,
    which the worker keeps filling directly."""

    def __init__(self, queue, samples: AsyncSamples):
        self._queue = queue
        self._samples = samples

    def get(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            sample = self._queue.get(*args, **kwargs)
        finally:
            self._samples._inst._step_wait_s += time.perf_counter() - started
        self._samples._inst._hook("samples", self._samples.taken, sample)
        return sample

    def __getattr__(self, name):
        return getattr(self._queue, name)


def _ns(seconds, default: int) -> int:
    """A ``time.time()`` stamp in nanoseconds, ``default`` when there is none (or it is after ``default``)."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return default
    return min(int(seconds * 1e9), default)


def _number(value) -> float | None:
    """A reward as a span carries it: None for NaN (TRL's "no score") or what is not a number."""
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _flat(metrics: dict) -> bool:
    """The group's rewards have no spread: TRL's advantage, (r - mean) / (std + 1e-8), is 0 for all of it."""
    std = _number(metrics.get("reward_std"))
    return std is not None and abs(std) <= 1e-8
