"""verl in one call: ``instrument(trainer, store="runs/", run_id="verl-1")`` on its built ``RayPPOTrainer``.

verl's trainer is a single controller: every step, one batch (``DataProto``) reaches the driver with each
rollout's prompt and response tokens, ``response_mask`` (1 = tokens the model wrote, 0 = tool or environment
tokens), scores, group (``uid``) and turn count, and the trainer trains on it. The adapter wraps, on the
instance, the actor update (``_update_actor``: the final batch of the step, after rewards and advantages),
the rollout manager's ``generate_sequences`` (the generation window) and the checkpoint manager's
``update_weights`` (the weight sync); from the batch it records, through the store exporter of ``attach()``:

* ``rl.rollout`` per sample: group = ``uid``, task = the dataset's ``index`` (else the uid), environment =
  ``data_source``, policy version = the step's (verl syncs the weights before generating; the fully async
  trainer's ``min_global_steps`` where verl stamps it), status ``aborted`` for an empty response (verl's own
  "aborted"), else ``ok``; reward = the sequence score (``token_level_scores`` summed: ``critic/score``).
* ``rl.turn`` per run of 1s in ``response_mask``: prompt tokens = the prompt and everything before the turn,
  decoded tokens = the run; the last turn ``["length"]`` when the response fills ``response_length`` (verl's
  ``response_length/clip_ratio`` test), else ``["stop"]``; earlier ones ``["tool_calls"]``; the rollout's
  speculative-decoding counts (``spec_num_*``) on its turns.
* ``execute_tool {name}`` per tool call, with the tokens of the reply fed back (``observation_tokens``, the
  run of 0s that follows the turn), so a rollout's turns and tools add up to verl's ``response_length``.
* ``rl.reward`` (``score``), ``rl.sample`` (``used``; ``zero_signal`` when every score of the uid group is
  equal, GRPO's zero advantage; ``invalid`` for an aborted response), ``rl.train_step`` (samples, tokens =
  verl's ``global_token_num``, seconds waiting for generation), ``rl.weight_sync``.
* Transcripts (the ``messages`` dataset, unless capture is off), decoded with the trainer's tokenizer as verl's
  own dumps are: each turn's input is what entered the conversation since the model's last reply (the
  dataset's chat messages on the first turn, system ones as its system instructions; then the tool messages
  verl fed back), its output the reply with the tool calls verl's parser found in it; each tool call's
  arguments and result.

With rollscope's agent loops in verl's workers (``rollscope.integrations.verl_agent``, one config entry),
turns and tool calls carry their own times, tool names, outcomes and per-call speculative counts; without
them, turns share the rollout's generation window in proportion to their tokens (``rollscope.turn.timing`` =
``"apportioned"``) and each tool reply is one ``execute_tool environment``.

On the training thread the adapter keeps references to the batch's tensors and notes times; decoding,
counting and span building happen on its own thread, handed over as the TRL adapter's are
(``rollscope.integrations.handover``). Importing this module loads neither torch nor verl; nothing raises
into training (a failure is logged once per hook and counted in ``stats``).
"""

from __future__ import annotations

import functools
import logging
import time

from rollscope import semconv
from rollscope.collectors.content import encode, encode_text
from rollscope.collectors.spans import CONTENT_FIELDS
from rollscope.integrations.handover import Handover, installed
from rollscope.integrations.trl_spans import (
    _NAME,
    _attributes,
    _columns,
    _runs,
)

log = logging.getLogger("rollscope.integrations.verl")

KEY = "rollscope"  # the rollout note of rollscope.integrations.verl_agent (kept equal there)
TIMING = "rollscope.turn.timing"
_SYSTEM, _INPUT, _OUTPUT, _ARGUMENTS, _RESULT = (
    CONTENT_FIELDS[key][0] for key in ("system", "input", "output", "arguments", "result")
)
_V1 = "verl.trainer.ppo.v1"  # the TransferQueue trainer (trainer.use_v1, verl 0.9's default): not wrapped
_SPEC = {
    "spec_num_draft_tokens": "spec_draft_tokens",
    "spec_num_accepted_tokens": "spec_accepted_tokens",
    "spec_num_verify_steps": "spec_verify_steps",
}


def instrument(trainer, store=None, run_id: str | None = None, **attach_kwargs) -> VerlInstrumentation:
    """Instrument a built verl ``RayPPOTrainer`` (before or after ``init_workers()``); returns the handle
    (``.rl``, ``.stats``, ``.close()``). ``store``, ``run_id`` and any other keyword go to ``attach()``; a bad
    store or run id fails here, as does something that is not a verl trainer (``TypeError``)."""
    existing = getattr(trainer, "_rollscope_instrumentation", None)
    if existing is not None:
        return existing
    if not callable(getattr(trainer, "_update_actor", None)) or not callable(getattr(trainer, "fit", None)):
        raise TypeError(f"instrument() takes a verl RayPPOTrainer, not {type(trainer).__name__}")
    if any(c.__module__.startswith(_V1) for c in type(trainer).__mro__):
        raise TypeError(
            f"instrument() takes verl's RayPPOTrainer (trainer.use_v1=false); {type(trainer).__name__} is the v1 "
            "trainer, whose batches stay in TransferQueue: see docs/integrations.md, verl"
        )
    attach_kwargs.setdefault("role", "train")
    attach_kwargs.setdefault("service_name", "verl")
    attach_kwargs.setdefault("set_global", False)
    for key, value in _describe(trainer).items():
        attach_kwargs.setdefault(key, value)
    return installed(VerlInstrumentation, trainer, store, run_id, attach_kwargs)


def _describe(trainer) -> dict:
    out = {}
    try:
        out["algorithm"] = (
            str(trainer.config.algorithm.adv_estimator).lower().removeprefix("advantageestimator.")
        )
        out["model_name"] = str(trainer.config.actor_rollout_ref.model.path)
    except Exception:
        log.debug("rollscope: could not describe the verl run", exc_info=True)
    return out


class VerlInstrumentation(Handover):
    """The hooks on one verl trainer; ``stats`` as the TRL adapter's."""

    label = "verl"
    thread_name = "rollscope-verl"
    _log = log

    def __init__(self, trainer, rl, out):
        super().__init__(rl, out)
        self.trainer = trainer
        self._gen: tuple[int, int] | None = None  # the step's generation window
        self._last_end: int | None = None

    # --- installing ---------------------------------------------------------------------------------------

    def install(self) -> None:
        t = self.trainer
        t._update_actor = self._wrap_update(t._update_actor)
        t.fit = self._wrap_fit(t.fit)
        self._wrap_workers()
        init = getattr(t, "init_workers", None)
        if callable(init):  # the rollout and checkpoint managers are made there
            t.init_workers = self._after(init, self._wrap_workers)

    def _wrap_workers(self) -> None:
        t = self.trainer
        manager = getattr(t, "async_rollout_manager", None)
        if manager is not None and not hasattr(manager.generate_sequences, "_rollscope"):
            manager.generate_sequences = self._wrap_generate(manager.generate_sequences)
        checkpoints = getattr(t, "checkpoint_manager", None)
        if checkpoints is not None and not hasattr(checkpoints.update_weights, "_rollscope"):
            checkpoints.update_weights = self._wrap_sync(checkpoints.update_weights)

    # --- wrappers (training thread: times and references only) ----------------------------------------------

    @staticmethod
    def _after(original, then):
        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            result = original(*args, **kwargs)
            then()
            return result

        return wrapped

    def _wrap_update(self, original):
        @functools.wraps(original)
        def update_actor(batch, *args, **kwargs):
            started = time.time_ns()
            output = original(batch, *args, **kwargs)
            self._hook("step", self._step, batch, started, time.time_ns())
            return output

        update_actor._rollscope = True
        return update_actor

    def _wrap_generate(self, original):
        @functools.wraps(original)
        def generate_sequences(*args, **kwargs):
            started = time.time_ns()
            output = original(*args, **kwargs)
            self._gen = (started, time.time_ns())
            return output

        generate_sequences._rollscope = True
        return generate_sequences

    def _wrap_sync(self, original):
        @functools.wraps(original)
        def update_weights(*args, **kwargs):
            started = time.time_ns()
            result = original(*args, **kwargs)
            version = (
                args[0] if args else kwargs.get("global_steps", getattr(self.trainer, "global_steps", 0))
            )
            self._hook("weight_sync", self._submit, "weight_sync", self._emit_sync, version, started)
            return result

        update_weights._rollscope = True
        return update_weights

    def _wrap_fit(self, original):
        @functools.wraps(original)
        def fit(*args, **kwargs):
            try:
                return original(*args, **kwargs)
            finally:
                self._guard("train_end", self._drain)
                self._guard("train_end", self.rl.force_flush)

        return fit

    def _step(self, batch, update_start: int, update_end: int) -> None:
        gen, self._gen = self._gen, None
        step = {
            "step": int(getattr(self.trainer, "global_steps", 1)) - 1,
            "start": gen[0] if gen else (self._last_end or update_start),
            "gen": gen,
            "end": update_end,
            "tensors": {key: batch.batch[key] for key in _TENSORS},
            "columns": dict(batch.non_tensor_batch),
        }
        self._last_end = update_end
        self._submit("step", self._emit_step, step, completions=len(batch))

    # --- spans (the adapter's thread) ------------------------------------------------------------------------

    def _emit_sync(self, version, started: int) -> None:
        attributes = _columns(_attributes(dict(policy_version=int(version))))
        self._out.spans(semconv.WEIGHT_SYNC, [started], [time.time_ns()], attributes)
        self.counts["rl.weight_sync"] += 1

    def _emit_step(self, step: dict) -> None:
        rollouts = _rollouts(step, self.rl.run_id)
        self._emit_rollouts(step, rollouts)
        decode = _decoder(getattr(self.trainer, "tokenizer", None)) if self.rl.capture else None
        for r in rollouts:
            self._emit_turns(step, r, decode)
        self._emit_samples(step, rollouts)
        fields = dict(
            train_step=step["step"],
            policy_version=step["step"] + 1,
            train_samples=len(rollouts),
            train_tokens=sum(r["prompt_tokens"] + r["response_tokens"] for r in rollouts),
            train_wait_s=(step["gen"][1] - step["gen"][0]) / 1e9 if step["gen"] else None,
        )
        self._out.spans(semconv.TRAIN_STEP, [step["start"]], [step["end"]], _columns(_attributes(fields)))
        self.counts["rl.train_step"] += 1

    def _emit_rollouts(self, step: dict, rollouts: list[dict]) -> None:
        n = len(rollouts)
        attributes = {
            semconv.ROLLOUT_ID: [r["id"] for r in rollouts],
            **{
                _NAME[column]: [r[column] for r in rollouts]
                for column in (
                    "task_id",
                    "group_id",
                    "environment",
                    "policy_version",
                    "rollout_status",
                    "reward",
                )
            },
            "verl.num_turns": [r["num_turns"] for r in rollouts],
        }
        starts, ends = [r["start"] for r in rollouts], [r["end"] for r in rollouts]
        step["spans"] = self._out.spans(semconv.ROLLOUT, starts, ends, attributes)
        rewards = {
            _NAME["reward_name"]: ["score"] * n,
            _NAME["reward"]: [r["reward"] for r in rollouts],
            semconv.ROLLOUT_ID: [r["id"] for r in rollouts],
        }
        self._out.spans(semconv.REWARD, ends, ends, rewards, step["spans"], list(range(n)))
        self.counts["rl.rollout"] += n
        self.counts["rl.reward"] += n

    def _emit_turns(self, step: dict, r: dict, decode) -> None:
        for turn in _turns(r, decode):
            extra = {semconv.FINISH_REASONS: turn.pop("finish"), **turn.pop("attributes")}
            fields = {k: v for k, v in turn.items() if k not in ("start", "end")}
            one = _attributes(fields, extra, r["id"])
            self._out.spans(
                semconv.TURN, [turn["start"]], [turn["end"]], _columns(one), step["spans"], [r["i"]]
            )
            self.counts["rl.turn"] += 1
        for tool in _tools(r, decode):
            name = tool.pop("name")
            start, end, extra = tool.pop("start"), tool.pop("end"), tool.pop("attributes")
            extra[semconv.OPERATION_NAME] = semconv.TOOL_PREFIX
            one = _attributes(dict(tool_name=name, **tool), extra, r["id"])
            span = f"{semconv.TOOL_PREFIX} {name}"
            self._out.spans(span, [start], [end], _columns(one), step["spans"], [r["i"]])
            self.counts["execute_tool"] += 1

    def _emit_samples(self, step: dict, rollouts: list[dict]) -> None:
        now = time.time_ns()
        attributes = {
            semconv.ROLLOUT_ID: [r["id"] for r in rollouts],
            _NAME["train_step"]: [step["step"]] * len(rollouts),
            _NAME["sample_decision"]: [r["decision"] for r in rollouts],
            _NAME["sample_staleness"]: [step["step"] - r["policy_version"] for r in rollouts],
            _NAME["sample_tokens"]: [r["prompt_tokens"] + r["response_tokens"] for r in rollouts],
        }
        self._out.spans(semconv.SAMPLE, [step["end"]] * len(rollouts), [now] * len(rollouts), attributes)
        self.counts["rl.sample"] += len(rollouts)


_TENSORS = ("prompts", "responses", "response_mask", "attention_mask", "token_level_scores")


def _rollouts(step: dict, run_id: str) -> list[dict]:
    """The batch's samples as plain Python: lengths, mask runs, score, group, note and decision."""
    t = {key: value.detach().cpu() for key, value in step["tensors"].items()}
    width_p, width_r = t["prompts"].shape[1], t["responses"].shape[1]
    prompt_tokens = t["attention_mask"][:, :width_p].sum(-1).tolist()
    response_tokens = t["attention_mask"][:, width_p:].sum(-1).tolist()
    scores = t["token_level_scores"].sum(-1).tolist()
    columns = step["columns"]
    n = len(scores)
    out = []
    for i in range(n):
        length = int(response_tokens[i])
        note = _column(columns, KEY, i)
        uid = _column(columns, "uid", i)
        index = _column(columns, "index", i)
        versions = _column(columns, "min_global_steps", i)
        policy = int(versions) if versions is not None else step["step"]
        gen = step["gen"] or (step["start"], step["end"])
        out.append(
            {
                "i": i,
                "id": f"{run_id}/s{step['step']}/{i}",
                "task_id": str(index) if index is not None else (str(uid) if uid is not None else None),
                "group_id": str(uid) if uid is not None else None,
                "environment": str(_column(columns, "data_source", i) or "default"),
                "policy_version": policy,
                "rollout_status": semconv.ROLLOUT_OK if length else semconv.ROLLOUT_ABORTED,
                "reward": float(scores[i]),
                "num_turns": int(_column(columns, "__num_turns__", i) or 0),
                "prompt_tokens": int(prompt_tokens[i]),
                "response_tokens": length,
                "clipped": length == width_r,
                "prompt_ids": t["prompts"][i, width_p - int(prompt_tokens[i]) :].tolist(),
                "response_ids": t["responses"][i, :length].tolist(),
                "runs": _runs(t["response_mask"][i, :length].tolist()) if length else [],
                "note": note if isinstance(note, dict) else None,
                "spec": {column: _column(columns, key, i) for key, column in _SPEC.items()},
                "raw_prompt": _column(columns, "raw_prompt", i),
                "start": (note or {}).get("start_ns") or gen[0],
                "end": (note or {}).get("end_ns") or gen[1],
            }
        )
    _decide(out)
    return out


def _column(columns: dict, key: str, i: int):
    values = columns.get(key)
    if values is None or i >= len(values):
        return None
    value = values[i]
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value


def _decide(rollouts: list[dict]) -> None:
    """verl's GRPO test: a uid group whose scores are all equal gets advantage 0 (zero_signal)."""
    groups: dict = {}
    for r in rollouts:
        groups.setdefault(r["group_id"], []).append(r["reward"])
    for r in rollouts:
        scores = groups[r["group_id"]]
        if r["rollout_status"] != semconv.ROLLOUT_OK:
            r["decision"] = "invalid"
        elif r["group_id"] is not None and len(scores) > 1 and max(scores) == min(scores):
            r["decision"] = "zero_signal"
        else:
            r["decision"] = "used"


def _turns(r: dict, decode) -> list[dict]:
    """One turn per run of model tokens; times from the loop's note, else the window shared by tokens; with
    ``decode`` (capture on), its transcript."""
    calls = (r["note"] or {}).get("calls") or []
    model = [n for is_model, n in r["runs"] if is_model] or [0]
    timed = len(calls) >= len(model)
    total, cursor, context, k = sum(n or 1 for n in model), r["start"], r["prompt_tokens"], 0
    turns, given, position = [], _prompt(r), 0
    for is_model, n in r["runs"] or [(True, 0)]:
        ids = r["response_ids"][position : position + n]
        position += n
        if not is_model:
            context += n
            given = _replies(r, k - 1, ids, decode) if decode else []
            continue
        last = k == len(model) - 1
        if timed:
            start, end = calls[k]["start_ns"], calls[k]["end_ns"]
        else:
            start, cursor = cursor, cursor + (r["end"] - r["start"]) * (n or 1) // total
            end = r["end"] if last else cursor
        finish = ("length" if r["clipped"] else "stop") if last else "tool_calls"
        attributes = {} if timed else {TIMING: "apportioned"}
        if decode is not None:
            attributes.update(_turn_content(r, k, given, decode(ids), finish))
        turn = dict(turn_index=k, input_tokens=context, output_tokens=n, policy_version=r["policy_version"])
        turn.update(_spec(r, calls[k] if timed else None, last))
        turns.append(dict(turn, start=start, end=max(end, start), finish=(finish,), attributes=attributes))
        context += n
        given, k = [], k + 1
    return turns


def _spec(r: dict, call: dict | None, last: bool) -> dict:
    """Speculative counts: the call's own when the loop noted them, else the rollout's totals on its last turn."""
    if call is not None and any(key in call for key in _SPEC):
        return {column: call.get(key) for key, column in _SPEC.items()}
    return {column: (int(v) if v is not None else None) for column, v in r["spec"].items()} if last else {}


def _tools(r: dict, decode) -> list[dict]:
    """The loop's noted tool calls (the reply's tokens on the first of each turn's calls), else one
    ``environment`` call per run of reply tokens; with ``decode``, their arguments and results."""
    noted = (r["note"] or {}).get("tools") or []
    replies, k = [], -1  # (turn before it, tokens, ids)
    position = 0
    for is_model, n in r["runs"]:
        if is_model:
            k += 1
        else:
            replies.append((k, n, r["response_ids"][position : position + n]))
        position += n
    out, given = [], set()
    for tool in noted:
        tokens = next((n for turn, n, _ in replies if turn == tool["turn"] and turn not in given), None)
        given.add(tool["turn"])
        content = {_ARGUMENTS: encode_text(tool.get("arguments")), _RESULT: encode_text(tool.get("result"))}
        out.append(
            dict(
                name=tool["name"],
                tool_call_id=tool.get("id"),
                tool_exit_code=1 if tool.get("failed") else 0,
                observation_tokens=tokens,
                start=tool["start_ns"],
                end=tool["end_ns"],
                attributes=content if decode else {},
            )
        )
    for turn, n, ids in replies:
        if turn not in given:
            when = r["end"]
            content = {_RESULT: decode(ids)} if decode else {}
            out.append(
                dict(name="environment", observation_tokens=n, start=when, end=when, attributes=content)
            )
    return out


# --- transcripts (capture on) -------------------------------------------------------------------------------


def _decoder(tokenizer):
    """Token ids to text as verl's own dumps decode them (special tokens skipped); None without a tokenizer."""
    if tokenizer is None:
        return None
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True) if ids else ""


def _prompt(r: dict) -> list:
    """The first turn's input: the dataset's chat messages (``raw_prompt``) as verl gave them to the loop,
    system ones aside (they are the system instructions, ``r["system"]``)."""
    messages = r.get("raw_prompt")
    if not isinstance(messages, list | tuple):
        return []
    messages = [m for m in messages if isinstance(m, dict)]
    r["system"] = [m for m in messages if m.get("role") == "system"]
    return [m for m in messages if m.get("role") != "system"]


def _replies(r: dict, turn: int, ids: list, decode) -> list:
    """What was fed back after model call ``turn``: the loop's tool messages (their text as verl put it in
    the conversation), else the decoded tokens of the reply."""
    noted = [t for t in (r["note"] or {}).get("tools") or [] if t["turn"] == turn]
    if not noted:
        return [{"role": "tool", "content": decode(ids)}]
    return [{"role": "tool", "content": t.get("result"), "tool_call_id": t.get("id")} for t in noted]


def _turn_content(r: dict, k: int, given: list, text: str, finish: str) -> dict:
    """A turn's content attributes: what it added to the conversation, its reply (text, and the tool calls
    the loop parsed from it), and on the first turn the system instructions."""
    calls = [
        {"type": "tool_call", "id": t.get("id"), "name": t["name"], "arguments": t.get("arguments")}
        for t in (r["note"] or {}).get("tools") or []
        if t["turn"] == k
    ]
    reply = {
        "role": "assistant",
        "parts": [{"type": "text", "content": text}, *calls],
        "finish_reason": finish,
    }
    out = {_OUTPUT: encode(reply, "output")}
    if given:
        out[_INPUT] = encode(given, "input")
    if k == 0 and r.get("system"):
        out[_SYSTEM] = encode(r["system"], "system")
    return out
