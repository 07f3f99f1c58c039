"""verifiers environments: every rollout they run (or ran, from ``traces.jsonl``) as rollscope spans.

```python
from rollscope.integrations.verifiers import instrument

instrument(env, store="runs/", run_id="vf-1")   # an Env from verifiers.v1 (PyPI ``verifiers`` 0.4)
```

``instrument`` wraps the environment's ``run_slot``, the call every verifiers runner (``vf-eval``, GEPA, the
env server, prime-rl) makes once per episode; when an episode is final its traces become spans. Saved runs
are imported with ``rollscope import verifiers traces.jsonl --store DIR --run-id ID``. Both read the
episode's JSON record (``Episode.model_dump(mode="json")``, one line of ``traces.jsonl``), so a live run and
an imported one give the same rows. verifiers itself is needed only for ``instrument``.

Per trace (one agent's rollout in an episode):

- ``rl.rollout``: id = the trace id, task = the task key, group = the episode's group (else the task: the
  rollouts of one task in a run), environment = the env's name or id, policy version = the train work's
  policy, status ``ok`` / ``infra_error`` (errors) / ``aborted`` (neither ok nor an error), reward = the
  weighted sum of the rubric's rewards; ``verifiers.stop_condition``, ``verifiers.is_timeout``,
  ``verifiers.is_truncated``, ``verifiers.timing.{boot,setup,agent,model,harness,finalize,scoring}_s``,
  ``verifiers.metric.<name>``; each error an ``exception`` event, the last one the span's status.
- ``rl.turn`` per model call: its own start and end, input tokens with cached ones included
  (``cached_input_tokens`` from ``usage.cached_input_tokens``), output and reasoning tokens, model, finish
  reason, and the call's error if it failed. Prefix continuity, from verifiers' message graph (each call's
  prompt is a path of message nodes; a prompt that does not extend an earlier call's path forks a branch, one
  training sample each): a call whose prompt extends the path of the earlier call it continues reads that call's
  tokens as its history (``context_tokens``), all an exact prefix (``prefix_tokens``) where the nodes carry
  their token ids (verifiers' renderer, which trains on them); a prompt that rewrote that history (a node
  re-rendered: stripped reasoning, an edited message) records ``continuity_break = 'retokenized'`` and, with
  token ids, the prefix up to the first rewritten node; a call its harness resumed from a compaction (a
  ``compaction`` semantic edge from the summarizing call) records ``compacted``, the history before (the
  tokens of the call that summary replaced) and after (its own prompt) and the branch it starts
  (``sample_id`` = ``<trace id>/<branch>``). verifiers reports what the engine served from its cache
  (``usage.cached_input_tokens``) but not why it missed: an eviction or another server is unattributed.
- ``execute_tool {name}`` per tool call the model made: from the end of the model call that asked for it to
  the moment its result entered the conversation (the result message's timestamp; the next request).
- the transcripts (``messages``, unless capture is off): each turn's input is what entered the conversation
  since the model's last reply (the prompt, tool results, user messages: the trace's nodes back along the
  parent links to the previous sampled one), its output the assistant message the call committed; each tool
  call's arguments and result.
- ``rl.reward`` per rubric function, timed by the scoring stage: its score (unweighted) and weight; a
  function that did not run (``None``) gives a reward span with no score.

Nothing raises into the run: a trace that cannot be converted is logged and skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from opentelemetry.trace import Status, StatusCode

from rollscope import semconv

log = logging.getLogger("rollscope.integrations")

_NS = 1_000_000_000
_TRUNCATING_STOPS = {
    "max_turns",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "compaction_failed",
}


class BadRecord(ValueError):
    """A line of a saved run that is not a verifiers episode; the message says which and why."""


# --- live: wrap an Env --------------------------------------------------------------------------------------


def instrument(
    env, store=None, run_id: str | None = None, *, rl=None, environment: str | None = None, **attach
):
    """Record every episode ``env`` runs from now on; returns the rollscope helpers (``rl``) it writes with.

    ``rl``: helpers from an earlier ``rollscope.attach()`` (else one is attached with ``store``, ``run_id``
    and ``attach``'s other keyword arguments). ``environment`` overrides the environment name.
    """
    if not callable(getattr(env, "run_slot", None)):  # before attach(): nothing written for a mistake
        raise TypeError(
            f"instrument() takes a verifiers Environment (its run_slot), not {type(env).__name__}"
        )
    if rl is None:
        from rollscope.collectors.attaching import attach as _attach

        attach.setdefault("role", "rollout")
        attach.setdefault("service_name", "verifiers")
        rl = _attach(store=store, run_id=run_id, **attach)
    original = env.run_slot
    if getattr(original, "_rollscope_wrapped", False):
        return rl

    async def run_slot(*args, **kwargs):
        episode = await original(*args, **kwargs)
        try:
            record_episode(rl, _record_of(episode), environment=environment)
        except Exception:
            log.exception("rollscope: could not record a verifiers episode")
        return episode

    run_slot._rollscope_wrapped = True
    env.run_slot = run_slot
    return rl


def _record_of(episode) -> Mapping:
    if isinstance(episode, Mapping):
        return episode
    return episode.model_dump(mode="json", exclude_none=True)


# --- saved: traces.jsonl --------------------------------------------------------------------------------------


def read_episodes(path: Path | str) -> list[Mapping]:
    """Every episode of a saved run (``traces.jsonl``, or the run directory holding it), all checked before
    any is returned; BadRecord names the first line that is not an episode, or says there are none."""
    path = Path(path)
    if path.is_dir():
        path = path / "traces.jsonl"
    episodes = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadRecord(f"{path}:{number}: not JSON ({e.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("traces"), list):
                raise BadRecord(f"{path}:{number}: not a verifiers episode (no 'traces' list)")
            for i, trace in enumerate(record["traces"]):
                if not isinstance(trace, dict) or not isinstance(trace.get("id"), str):
                    raise BadRecord(f"{path}:{number}: traces[{i}] has no 'id'")
            episodes.append(record)
    if not episodes:  # a run that was still starting, or the wrong file: an empty run written is not a result
        raise BadRecord(f"{path}: no episodes in it")
    return episodes


def import_file(path: Path | str, store, run_id: str, *, environment: str | None = None) -> dict[str, int]:
    """Write a saved run's episodes to ``store`` as run ``run_id``; returns counts of what was written."""
    from rollscope.collectors.attaching import attach

    episodes = read_episodes(path)
    rl = attach(store=store, run_id=run_id, role="rollout", service_name="verifiers", set_global=False)
    counts = {"episodes": 0, "rollouts": 0, "turns": 0, "tool_calls": 0, "rewards": 0}
    try:
        for episode in episodes:
            got = record_episode(rl, episode, environment=environment)
            counts["episodes"] += 1
            for key, n in got.items():
                counts[key] += n
    finally:
        rl.shutdown()
    return counts


# --- one episode -> spans -----------------------------------------------------------------------------------


def record_episode(rl, episode: Mapping, *, environment: str | None = None) -> dict[str, int]:
    """Emit the spans of one episode record through ``rl``; returns counts (rollouts, turns, ...)."""
    counts = {"rollouts": 0, "turns": 0, "tool_calls": 0, "rewards": 0}
    env = episode.get("env") or {}
    environment = environment or env.get("name") or env.get("id") or "default"
    group = (episode.get("group") or {}).get("id")
    policy = (((episode.get("run") or {}).get("work") or {}).get("policy") or {}).get("start")
    for trace in episode.get("traces") or []:
        try:
            got = _record_trace(rl, trace, environment, group, policy)
        except Exception:
            log.exception("rollscope: could not record verifiers trace %s", trace.get("id"))
            continue
        counts["rollouts"] += 1
        for key, n in got.items():
            counts[key] += n
    return counts


def _record_trace(rl, trace: Mapping, environment: str, group: str | None, policy) -> dict[str, int]:
    task = trace.get("task") or {}
    data = task.get("data") or {}
    task_id = task.get("key") or task.get("hash") or data.get("id") or data.get("name")
    timing = trace.get("timing") or {}
    calls = trace.get("calls") or []
    nodes = trace.get("nodes") or []
    start = _ns(timing.get("start")) or min((_ns(_span(c, "time")[0]) for c in calls), default=0)
    end = max(
        [start]
        + [_ns(_span(timing, stage)[1]) for stage in ("boot", "setup", "agent", "finalize", "scoring")]
        + [_ns(_span(c, "time")[1]) for c in calls]
    )
    rewards = trace.get("rewards") or {}
    scored = [r for r in rewards.values() if isinstance(r, Mapping) and r.get("score") is not None]
    errors = trace.get("errors") or []
    ok = bool(trace.get("ok"))
    status = (
        semconv.ROLLOUT_OK if ok else (semconv.ROLLOUT_INFRA_ERROR if errors else semconv.ROLLOUT_ABORTED)
    )
    attributes = _rollout_attributes(trace, calls, timing)
    fields = {
        "task_id": str(task_id) if task_id is not None else None,
        "group_id": str(group) if group is not None else (str(task_id) if task_id is not None else None),
        "environment": environment,
        "policy_version": policy if isinstance(policy, int) else None,
        "rollout_status": status,
        "reward": sum(float(r["score"]) * float(r.get("weight", 1.0)) for r in scored) if scored else None,
    }
    counts = {"turns": 0, "tool_calls": 0, "rewards": 0}
    with rl.rollout(trace["id"], start_time=start, end_time=end, **fields) as rollout:
        rollout.span.set_attributes(attributes)
        for error in errors:
            rollout.add_event("exception", _error_attributes(error), timestamp=end)
        if errors:
            last = errors[-1]
            rollout.set_status(Status(StatusCode.ERROR, f"{last.get('type')}: {last.get('message')}"))
        turn_end = {}
        for index, (call, continuity) in enumerate(
            zip(calls, _continuity(trace["id"], calls, nodes), strict=True)
        ):
            counts["turns"] += 1
            turn_end[call.get("node")] = _record_call(rl, index, call, start, nodes, continuity)
        counts["tool_calls"] += _record_tools(rl, nodes, turn_end)
        score_start, score_end = (_ns(t) for t in _span(timing, "scoring"))
        score_start = score_start or end
        for name, reward in rewards.items():
            counts["rewards"] += 1
            reward = reward if isinstance(reward, Mapping) else {}
            with rl.reward(
                reward_name=str(name),
                reward=float(reward["score"]) if reward.get("score") is not None else None,
                start_time=score_start,
                end_time=max(score_end, score_start),
                attributes={"verifiers.reward.weight": float(reward.get("weight", 1.0))} if reward else {},
            ):
                pass
    return counts


def _rollout_attributes(trace: Mapping, calls: list, timing: Mapping) -> dict:
    attributes = {
        "verifiers.stop_condition": trace.get("stop_condition"),
        "verifiers.is_timeout": bool(trace.get("is_timeout")),
        "verifiers.is_truncated": _is_truncated(trace, calls),
        "verifiers.agent": (trace.get("agent") or {}).get("name"),
        "verifiers.turns": len(calls),
    }
    for stage in ("boot", "setup", "agent", "finalize", "scoring"):
        begin, finish = _span(timing, stage)
        if finish:
            attributes[f"verifiers.timing.{stage}_s"] = max(0.0, float(finish) - float(begin or finish))
    agent = timing.get("agent") or {}
    for part in ("model", "harness"):
        duration = (agent.get(part) or {}).get("duration")
        if duration is not None:
            attributes[f"verifiers.timing.{part}_s"] = float(duration)
    for name, value in (trace.get("metrics") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[f"verifiers.metric.{name}"] = float(value)
    errors = trace.get("errors") or []
    if errors:
        attributes["error.type"] = str(errors[-1].get("type"))
    return {k: v for k, v in attributes.items() if v is not None}


def _is_truncated(trace: Mapping, calls: list) -> bool:
    """verifiers' own ``Trace.is_truncated``: a truncating stop, or the last good call stopped by length."""
    if trace.get("stop_condition") in _TRUNCATING_STOPS:
        return True
    last = next((c for c in reversed(calls) if not c.get("error")), None)
    return bool(last and last.get("finish_reason") == "length")


def _record_call(rl, index: int, call: Mapping, fallback: int, nodes: list, continuity: dict) -> int:
    begin, finish = (_ns(t) for t in _span(call, "time"))
    begin = begin or fallback
    finish = max(finish, begin)
    usage = call.get("usage") or {}
    cached = usage.get("cached_input_tokens")
    attributes = {}
    if call.get("finish_reason"):
        attributes[semconv.FINISH_REASONS] = [str(call["finish_reason"])]
    if usage.get("reasoning_tokens") is not None:
        attributes["gen_ai.usage.reasoning.output_tokens"] = int(usage["reasoning_tokens"])
    if call.get("endpoint"):
        attributes["verifiers.endpoint"] = str(call["endpoint"])
    error = call.get("error")
    if error:
        attributes.update(_error_attributes(error))
        attributes["error.type"] = str(error.get("type"))
    with rl.turn(
        index,
        **_turn_content(nodes, call.get("node")),
        input_tokens=_input(call),
        cached_input_tokens=cached,
        output_tokens=usage.get("completion_tokens"),
        request_model=call.get("model"),
        start_time=begin,
        end_time=finish,
        attributes=attributes,
        **continuity,
    ) as turn:
        if error:
            turn.set_status(Status(StatusCode.ERROR, f"{error.get('type')}: {error.get('message')}"))
    return finish


# --- prefix continuity and compaction, from the message graph -------------------------------------------------


def _continuity(trace_id: str, calls: list, nodes: list) -> list[dict]:
    """Per model call, the ``rl.turn`` fields of its prefix continuity and compaction (the module's docstring)."""
    graph = _Graph(trace_id, calls, nodes)
    return [graph.turn(k) for k in range(len(calls))]


class _Graph:
    """A trace's calls on its message graph: each call's path of nodes, the earlier call it continues, the
    tokens each node adds (None without token ids: relayed calls, whose prompts the server tokenized)."""

    def __init__(self, trace_id: str, calls: list, nodes: list):
        self.trace_id, self.calls, self.nodes = trace_id, calls, nodes
        self.paths = [_path(nodes, call.get("node")) for call in calls]
        tokens = [len(node.get("token_ids") or ()) for node in nodes]
        self.tokens = tokens if any(tokens) else None
        self.continued = [_continued(self.paths, k) for k in range(len(calls))]

    def turn(self, k: int) -> dict:
        summary = _compaction_source(self.nodes[self.paths[k][-1]]) if self.paths[k] else None
        j = self._replaced(summary) if summary is not None else self.continued[k]
        if j is None:
            return {}
        prompt, earlier = self.paths[k][:-1], self.paths[j]
        common = _common(earlier, prompt)
        if summary is not None:
            fields = self._compacted(k, j)
        elif common == len(earlier):
            fields = {"context_tokens": self._history(earlier, j)}
        else:  # the prompt rewrote the history it continues
            history = _through_last_assistant(self.nodes, prompt)
            fields = {"context_tokens": self._history(history, j), "continuity_break": "retokenized"}
        if self.tokens is not None:
            fields["prefix_tokens"] = sum(self.tokens[n] for n in prompt[:common])
        return {key: value for key, value in fields.items() if value is not None}

    def _history(self, path: list[int], j: int) -> int | None:
        """The tokens of ``path``; without token ids, those call ``j`` ended with (its prompt and completion)."""
        return sum(self.tokens[n] for n in path) if self.tokens is not None else _total(self.calls[j])

    def _replaced(self, summary: int) -> int | None:
        """The call whose conversation a compaction replaced: the one its summarizing call continued."""
        attempt = next((j for j, path in enumerate(self.paths) if path and path[-1] == summary), None)
        return self.continued[attempt] if attempt is not None else None

    def _compacted(self, k: int, replaced: int) -> dict:
        """A call resumed from a compaction: the history the summary replaced (the tokens call ``replaced``
        ended with), the compacted history it read (its prompt) and the branch (training sample) it starts."""
        after = _input(self.calls[k])
        return {
            "context_tokens": after,
            "continuity_break": "compacted",
            "compaction_tokens_before": _total(self.calls[replaced]),
            "compaction_tokens_after": after,
            "sample_id": f"{self.trace_id}/{_branch(self.nodes, self.paths[k][-1])}",
        }


def _path(nodes: list, node) -> list[int]:
    """Node ids from the root to ``node`` ([] for a call that committed no node)."""
    if not isinstance(node, int) or not 0 <= node < len(nodes):
        return []
    out: list[int] = []
    while node is not None and len(out) <= len(nodes):
        out.append(node)
        node = nodes[node].get("parent")
    return out[::-1]


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _continued(paths: list[list[int]], k: int) -> int | None:
    """The earlier call whose conversation call ``k``'s prompt shares most (the latest on a tie): the one it
    continues, in a trace whose agents (and subagents) interleave their calls."""
    if not paths[k]:
        return None
    prompt = paths[k][:-1]
    best = max(((_common(paths[j], prompt), j) for j in range(k) if paths[j]), default=None)
    return None if best is None or best[0] == 0 else best[1]


def _compaction_source(node: Mapping) -> int | None:
    """The summarizing call's node of a ``compaction`` semantic edge into this call's node, if any."""
    for link in node.get("semantic_parents") or ():
        if (
            isinstance(link, Mapping)
            and link.get("type") == "compaction"
            and isinstance(link.get("node"), int)
        ):
            return link["node"]
    return None


def _branch(nodes: list, node: int) -> int:
    """The index of the first branch (verifiers' ``Trace.branches``: one per leaf, in node order) holding ``node``."""
    parents = {n.get("parent") for n in nodes if n.get("parent") is not None}
    leaves = [i for i in range(len(nodes)) if i not in parents]
    return next((b for b, leaf in enumerate(leaves) if node in _path(nodes, leaf)), 0)


def _through_last_assistant(nodes: list, prompt: list[int]) -> list[int]:
    """The prompt's history: its nodes through the last assistant message (the new messages after it are not)."""
    roles = [((nodes[n].get("message") or {}).get("role")) for n in prompt]
    last = max((i for i, role in enumerate(roles) if role == "assistant"), default=-1)
    return prompt[: last + 1]


def _input(call: Mapping) -> int | None:
    usage = call.get("usage") or {}
    prompt = usage.get("prompt_tokens")
    return prompt + (usage.get("cached_input_tokens") or 0) if prompt is not None else None


def _total(call: Mapping) -> int | None:
    """The tokens a call ended with: its prompt (cache reads included) and its completion."""
    prompt, completion = _input(call), (call.get("usage") or {}).get("completion_tokens")
    return prompt + completion if prompt is not None and completion is not None else None


def _record_tools(rl, nodes: list, turn_end: dict) -> int:
    """One ``execute_tool`` span per tool call an assistant node made, ended by its result's node."""
    results = {}
    for node in nodes:
        message = node.get("message") or {}
        if message.get("role") == "tool" and message.get("tool_call_id"):
            results.setdefault(message["tool_call_id"], node)
    count = 0
    for index, node in enumerate(nodes):
        message = node.get("message") or {}
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        begin = turn_end.get(index) or _ns(node.get("timestamp"))
        for call in message["tool_calls"]:
            result = results.get(call.get("id"))
            finish = max(_ns(result.get("timestamp")), begin) if result else begin
            name = str(call.get("name") or "tool")
            with rl.tool(
                name,
                tool_call_id=call.get("id"),
                arguments=call.get("arguments"),
                result=(result.get("message") or {}).get("content") if result else None,
                start_time=begin,
                end_time=finish,
                attributes={"verifiers.tool.answered": result is not None},
            ):
                pass
            count += 1
    return count


def _turn_content(nodes: list, node) -> dict:
    """A model call's ``input`` (the messages that entered the conversation since the last sampled one, found
    back along the committed node's parent links) and ``output`` (the message it committed)."""
    if not isinstance(node, int) or not 0 <= node < len(nodes):
        return {}
    given, parent, seen = [], nodes[node].get("parent"), set()
    while isinstance(parent, int) and 0 <= parent < len(nodes) and parent not in seen:
        seen.add(parent)
        if nodes[parent].get("sampled"):
            break
        given.append(nodes[parent].get("message") or {})
        parent = nodes[parent].get("parent")
    return {"input": given[::-1] or None, "output": nodes[node].get("message")}


def _error_attributes(error: Mapping) -> dict:
    attributes = {"exception.type": str(error.get("type")), "exception.message": str(error.get("message"))}
    if error.get("status_code") is not None:
        attributes["http.response.status_code"] = int(error["status_code"])
    return attributes


def _span(holder: Mapping, key: str) -> tuple[float, float]:
    value = holder.get(key) or {}
    return value.get("start") or 0.0, value.get("end") or 0.0


def _ns(seconds) -> int:
    return int(float(seconds) * _NS) if seconds else 0
