"""Synthetic transcripts: what each simulated agent, tool and judge says, deterministic per seed and step.

Each environment kind talks as its agents would. A coding agent gets a system prompt and an issue to fix, replies
with a thought and one tool call per turn (``pytest -x``, ``sed``, ``cat``, reading and editing files), gets test
logs and file contents back, and ends with the patch; a reasoning rollout is one long chain of reasoning ending
in ``\\boxed{N}``; a judged rollout searches the web, answers, and its judge's prompt and rationale are kept. Text
follows the spans' token counts (``transcripts.chars_per_token`` characters a token, at most
``transcripts.max_chars`` a text): a large ``observation_tokens`` is a long test log, a turn cut at its
environment's ``output_max`` a reply cut mid-sentence (finish reason ``length``), a failing turn a reply cut
short (``error``).

The flags of docs/metrics.md ("Transcript flags") are injected with known rollouts, which the ground truth
counts per step (:class:`Truth`): replies cut at the token limit (where the plan's output reached its
``output_max``), final replies with no readable answer (those, and ``transcripts.answer_missing_rate`` of the
completed rollouts), reasoning that falls into a loop (``transcripts.loop_rate``), and tool calls that failed
(a lost sandbox, or a non-zero exit of any tool but ``run_tests``, whose non-zero exit is a failing test).

A step's messages are planned column-wise (:class:`Messages`: numpy arrays, sent to fast mode's writer
process as they are) and rendered there into the ``messages`` rows (:func:`table`), or, in the normal mode,
into the helpers' content arguments (:func:`helper_arguments`: ``output=``, ``result=``, ``prompt=``, ...),
which the collectors turn into the same rows; ``tests/test_transcripts_sim.py`` holds the two equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rollscope.collectors.content import DEFAULT_MAX_CHARS, capped
from rollscope.simulator import texts
from rollscope.simulator.plan import StepPlan
from rollscope.simulator.sampling import derive_seed

SOURCES = ("system", "input", "tool_arguments", "output", "tool_result")  # in a span's reading order
ROLES = ("system", "user", "assistant", "assistant", "tool")  # each source's role
KINDS = ("coding", "reasoning", "judged")
FINISH = (None, "tool_call", "stop", "length", "error")
# What a message's text is (how table() renders it).
SYSTEM, TASK, REPLY, ARGUMENTS, RESULT, JUDGE_PROMPT, RATIONALE = range(7)
# How a reply ends: a tool call, the final answer, no readable answer (empty, unparsable), cut at the limit,
# cut short by a failure.
CALLS, ANSWERS, EMPTY, UNPARSABLE, CUT, FAILED = range(6)
_WRONG = 7  # a wrong math answer is this far from the right one


@dataclass
class Messages:
    """A step's messages, one row each, with the identity of the span each belongs to and what its text is
    made of. ``names`` holds the strings the code columns index: ``rollout_ids``, ``span_names``, ``tools``,
    ``processes``."""

    trace_id: np.ndarray  # (n, 2) uint64: high and low halves
    span_id: np.ndarray
    start_ns: np.ndarray
    process: np.ndarray  # index into names["processes"]: who emits the span
    rollout: np.ndarray  # index into names["rollout_ids"]
    turn_index: np.ndarray  # -1: not a turn
    span_name: np.ndarray  # index into names["span_names"]
    source: np.ndarray  # index into SOURCES
    ordinal: np.ndarray
    tokens: np.ndarray  # -1: none
    tool: np.ndarray  # index into names["tools"], -1: none
    what: np.ndarray  # SYSTEM, TASK, ...
    kind: np.ndarray  # index into KINDS
    task: np.ndarray
    chars: np.ndarray  # about how long its text is
    ending: np.ndarray  # for a reply: CALLS, ANSWERS, ...; for a tool result: its exit code
    looping: np.ndarray  # a reply whose reasoning falls into a loop
    failing: np.ndarray  # a tool call (or the reply that makes it) that fails: its arguments are the error's
    variant: np.ndarray  # seeded choices: which sentence, which arguments, ...
    start: np.ndarray  # seeded: where in a pool its lines start
    value: np.ndarray  # a math answer given, a judge's reward in tenths, a tool call's index in its rollout
    names: dict[str, list[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.span_id)


# --- planning -------------------------------------------------------------------------------------------------


class _Rows:
    """Message rows gathered per kind of span, concatenated into :class:`Messages` at the end."""

    def __init__(self):
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, **columns) -> None:
        n = len(columns["span_id"])
        self.parts.append(
            {k: np.broadcast_to(np.asarray(v), (n, *np.shape(v)[1:])) for k, v in columns.items()}
        )

    def messages(self, names: dict) -> Messages:
        keys = self.parts[0].keys()
        columns = {k: np.concatenate([p[k] for p in self.parts]) for k in keys}
        return Messages(**columns, names=names)


def plan(c, p: StepPlan, turns, tools, scorings) -> tuple[Messages, dict[str, np.ndarray]]:
    """The step's messages and each rollout's flags (the ground truth), from its plan and the span tables the
    spans are built from (``turns``, ``tools``, ``scorings``: rows in the plan's order)."""
    draws = np.random.default_rng((derive_seed(c.seed, "transcripts"), p.step))
    t, calls = p.turns, p.tools
    R, T = len(p.rollouts), len(t)
    kind = np.asarray([KINDS.index(r.env.kind) for r in p.rollouts], dtype=np.int64)
    task = np.asarray([int(r.task_id.split("/")[1]) for r in p.rollouts], dtype=np.int64)
    out_max = np.asarray([r.env.output_max for r in p.rollouts], dtype=np.int64)
    completed = np.asarray([r.completed for r in p.rollouts], dtype=bool)
    calls_of = np.bincount(calls.rollout, minlength=R)
    turns_of = np.bincount(t.rollout, minlength=R)
    owner, k = t.rollout, t.index
    last = k == turns_of[owner] - 1
    failing = t.error != 0
    cut = ~failing & (t.output_tokens >= out_max[owner])
    has_call = k < calls_of[owner]
    final = last & ~has_call & ~failing
    u = draws.random((T, 3))
    missing = final & ~cut & completed[owner] & (u[:, 0] < c.transcripts.answer_missing_rate)
    looping = (kind[owner] == 1) & ~failing & (u[:, 1] < c.transcripts.loop_rate)
    ending = np.select(
        [failing, cut, missing & (u[:, 2] < 0.5), missing, final],
        [FAILED, CUT, EMPTY, UNPARSABLE, ANSWERS],
        CALLS,
    )
    rows, names = _Rows(), _names(c, p, calls)
    tool_error, call_variant = _tool_rows(c, rows, p, tools, kind, task, names["tools"], draws)
    call = np.where(has_call, (np.cumsum(calls_of) - calls_of)[owner] + k, -1)  # the call each turn makes
    said = {
        "tool": np.where(has_call, calls.tool[call] if len(calls) else -1, -1),
        "failing": has_call & ((tool_error & ~calls.lost)[call] if len(calls) else False),
        "variant": np.where(has_call, call_variant[call] if len(calls) else 0, 0),
    }
    _turn_rows(c, rows, p, turns, kind, task, ending, looping, said, draws)
    _judge_rows(c, rows, p, scorings, task)
    flags = {
        "truncated": np.bincount(owner, weights=cut, minlength=R) > 0,
        "answer_missing": np.bincount(owner, weights=final & (cut | missing), minlength=R) > 0,
        "looping": np.bincount(owner, weights=looping, minlength=R) > 0,
        "tool_errors": np.bincount(calls.rollout, weights=tool_error, minlength=R).astype(np.int64),
    }
    flags["answer_missing"] &= completed
    return rows.messages(names), flags


def _names(c, p: StepPlan, calls) -> dict[str, list[str]]:
    processes = [
        f"{kind}-{i}"
        for kind in ("rollout-server", "sandbox", "judge")
        for i in range(getattr(c, _PROCESS[kind]).count)
    ]
    return {
        "rollout_ids": [r.rollout_id for r in p.rollouts],
        "span_names": ["rl.turn", "rl.judge", *(f"execute_tool {n}" for n in calls.names)],
        "tools": list(calls.names),
        "processes": processes,
    }


_PROCESS = {"rollout-server": "rollout", "sandbox": "sandbox", "judge": "judge"}


def _process(c, kind: str, index: np.ndarray) -> np.ndarray:
    offset = {"rollout-server": 0, "sandbox": c.rollout.count, "judge": c.rollout.count + c.sandbox.count}
    return offset[kind] + index


def _identity(table, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "trace_id": table.trace_id[rows],
        "span_id": table.span_id[rows],
        "start_ns": table.start_ns[rows],
    }


def _chars(c, tokens: np.ndarray) -> np.ndarray:
    budget = np.rint(tokens * c.transcripts.chars_per_token).astype(np.int64)
    return np.clip(budget, 16, c.transcripts.max_chars)


def _turn_rows(c, rows: _Rows, p, turns, kind, task, ending, looping, call: dict, draws) -> None:
    """Each turn's reply, and the first turn's system prompt and task statement. ``call``: the tool call each
    turn makes (its tool, whether it fails, its arguments' variant), which its reply names."""
    t = p.turns
    owner, T = t.rollout, len(t)
    server = np.asarray([r.server for r in p.rollouts], dtype=np.int64)
    reward = np.asarray([-1.0 if r.reward is None else r.reward for r in p.rollouts])
    right = texts.answer(task)
    given = np.where(reward >= 0.5, right, np.where(reward < 0, right, (right + _WRONG) % 1000))
    common = {
        "process": _process(c, "rollout-server", server[owner]),
        "rollout": owner,
        "turn_index": t.index,
        "span_name": 0,
        "kind": kind[owner],
        "task": task[owner],
        "looping": False,
        "failing": False,
    }
    variant, start = draws.integers(0, 1 << 30, (2, T))
    variant = np.where(call["tool"] >= 0, call["variant"], variant)
    first = np.flatnonzero(t.index == 0)
    prompt = np.asarray([r.prompt for r in p.rollouts], dtype=np.int64)
    for source, what, ordinal in ((0, SYSTEM, 0), (1, TASK, 1)):
        rows.add(
            **_identity(turns, first),
            **{k: (v[first] if np.ndim(v) else v) for k, v in common.items()},
            source=source, ordinal=ordinal, tokens=-1, tool=-1, what=what,
            chars=_chars(c, prompt[owner[first]]), ending=0, variant=variant[first], start=start[first], value=0,
        )  # fmt: skip
    rows.add(
        **_identity(turns, np.arange(T)),
        **{**common, "looping": looping, "failing": call["failing"]},
        source=3, ordinal=np.where(t.index == 0, 2, 0), tokens=t.output_tokens, tool=call["tool"], what=REPLY,
        chars=_chars(c, t.output_tokens), ending=ending, variant=variant, start=start,
        value=np.where(kind[owner] == 1, given[owner], t.index),
    )  # fmt: skip


def _tool_rows(
    c, rows: _Rows, p, tools, kind, task, names: list[str], draws
) -> tuple[np.ndarray, np.ndarray]:
    """Each tool call's arguments and result (none from a lost sandbox); returns which calls failed, and each
    call's variant (which arguments: the reply making the call names the same)."""
    calls = p.tools
    n = len(calls)
    owner = calls.rollout
    sandbox = np.asarray([r.sandbox for r in p.rollouts], dtype=np.int64)
    tests = np.asarray([name == "run_tests" for name in names] or [False], dtype=bool)
    failed = calls.lost | ((calls.exit_code != 0) & ~tests[calls.tool])
    variant, start = draws.integers(0, 1 << 30, (2, n))
    common = {
        "process": _process(c, "sandbox", sandbox[owner]),
        "rollout": owner,
        "turn_index": -1,
        "span_name": 2 + calls.tool,
        "tool": calls.tool,
        "kind": kind[owner],
        "task": task[owner],
        "looping": False,
        "failing": failed & ~calls.lost,
        "variant": variant,
        "start": start,
        "value": 0,
    }
    rows.add(
        **_identity(tools, np.arange(n)), **common,
        source=2, ordinal=0, tokens=-1, what=ARGUMENTS, chars=0, ending=0,
    )  # fmt: skip
    ran = np.flatnonzero(~calls.lost)
    rows.add(
        **_identity(tools, ran), **{k: (v[ran] if np.ndim(v) else v) for k, v in common.items()},
        source=4, ordinal=1, tokens=calls.observation_tokens[ran], what=RESULT,
        chars=_chars(c, calls.observation_tokens[ran]), ending=calls.exit_code[ran],
    )  # fmt: skip
    return failed, variant


def _judge_rows(c, rows: _Rows, p, scorings, task) -> None:
    """Each judge call's prompt (rubric, question, the rollout's final reply) and rationale (when it scored)."""
    found = [(i, s) for i, r in enumerate(p.rollouts) for s in r.scorings]
    judged = np.asarray([j for j, (_, s) in enumerate(found) if s.kind == "judge"], dtype=np.int64)
    if not len(judged):
        return
    owner = np.asarray([found[j][0] for j in judged], dtype=np.int64)
    scoring = [found[j][1] for j in judged]
    reward = np.asarray([-1 if s.reward is None else round(s.reward * 10) for s in scoring], dtype=np.int64)
    common = {
        "process": _process(c, "judge", np.asarray([s.instance for s in scoring], dtype=np.int64)),
        "turn_index": -1,
        "span_name": 1,
        "tool": -1,
        "kind": 2,
        "looping": False,
        "failing": False,
        "ending": 0,
        "variant": 0,
        "start": 0,
    }
    rows.add(
        **_identity(scorings, judged), **common, rollout=owner, task=task[owner],
        source=1, ordinal=0, tokens=-1, what=JUDGE_PROMPT, chars=0, value=0,
    )  # fmt: skip
    scored = reward >= 0
    out = np.asarray([s.output_tokens for s in scoring], dtype=np.int64)
    common["process"] = common["process"][scored]
    rows.add(
        **_identity(scorings, judged[scored]), **common, rollout=owner[scored], task=task[owner][scored],
        source=3, ordinal=1, tokens=out[scored], what=RATIONALE, chars=0, value=reward[scored],
    )  # fmt: skip


# --- rendering --------------------------------------------------------------------------------------------------


class _Column:
    """A text column filled kind by kind (rows, values), assembled in one take (``texts.assemble``)."""

    def __init__(self, n: int):
        self.n = n
        self.parts: list[tuple[np.ndarray, pa.Array]] = []

    def put(self, rows: np.ndarray, values: pa.Array | None) -> None:
        if values is not None and len(rows):
            self.parts.append((rows, values))

    def array(self) -> pa.Array:
        return texts.assemble(self.n, self.parts)


def texts_of(m: Messages) -> dict[str, pa.Array]:
    """The messages' ``content``, ``reasoning``, ``tool_calls`` and ``finish_reason`` columns."""
    n = len(m)
    content, reasoning, calls = _Column(n), _Column(n), _Column(n)
    for i, name in enumerate(KINDS):
        rows = np.flatnonzero((m.what == SYSTEM) & (m.kind == i))
        content.put(rows, pa.array([texts.SYSTEM[name]] * len(rows), pa.string()))
        rows = np.flatnonzero((m.what == TASK) & (m.kind == i))
        keys = np.stack([m.task[rows], m.chars[rows]], axis=1)
        content.put(
            rows, texts.formatted(lambda t, chars, name=name: texts.task_statement(name, t, chars), keys)
        )
    replies = np.flatnonzero(m.what == REPLY)
    said = _replies(m, replies)
    for column, values in zip((content, reasoning, calls), said, strict=True):
        column.put(replies, values)
    for i, name in enumerate(m.names["tools"]):
        rows = np.flatnonzero((m.what == ARGUMENTS) & (m.tool == i))
        content.put(rows, texts.arguments_of(name, m.failing[rows], m.task[rows], m.variant[rows]))
    for i, name in enumerate(m.names["tools"]):
        rows = np.flatnonzero((m.what == RESULT) & (m.tool == i))
        chosen = (m.task[rows], m.chars[rows], m.ending[rows], m.variant[rows], m.start[rows])
        content.put(rows, texts.tool_result(name, *chosen))
    content.put(np.flatnonzero(m.what == JUDGE_PROMPT), _judge_prompts(m, replies, said[0]))
    rows = np.flatnonzero(m.what == RATIONALE)
    content.put(rows, texts.rationale(m.value[rows] / 10))
    finish = np.where(m.what == REPLY, np.take(_FINISH_OF, m.ending), np.where(m.what == RATIONALE, 2, 0))
    return {
        "content": content.array(),
        "reasoning": reasoning.array(),
        "tool_calls": calls.array(),
        "finish_reason": pa.array(FINISH, pa.string()).take(pa.array(finish)),
    }


_FINISH_OF = np.asarray([1, 2, 2, 2, 3, 4])  # each reply ending's finish reason (FINISH)


def _replies(m: Messages, rows: np.ndarray) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Replies' content, reasoning and tool calls."""
    kind, ending = m.kind[rows], m.ending[rows]
    content, reasoning, calls = (_Column(len(rows)) for _ in range(3))
    math = np.flatnonzero(kind == 1)
    reasoning.put(math, _chain(m, rows[math]))
    thoughts = np.flatnonzero((kind != 1) & np.isin(ending, (CALLS, CUT, FAILED)))
    content.put(thoughts, _thought(m, rows[thoughts]))
    for i, render in ((0, texts.final_coding), (1, None), (2, texts.final_judged)):
        answered = np.flatnonzero((kind == i) & (ending == ANSWERS))
        given = m.task[rows[answered]] if render else m.value[rows[answered]]
        content.put(answered, (render or texts.final_reasoning)(given))
        for code, text in ((EMPTY, ""), (UNPARSABLE, texts.UNPARSABLE[KINDS[i]])):
            none = np.flatnonzero((kind == i) & (ending == code))
            content.put(none, pa.array([text] * len(none), pa.string()))
    called = np.flatnonzero(ending == CALLS)
    calls.put(called, _tool_calls(m, rows[called]))
    return content.array(), reasoning.array(), calls.array()


def _stopped(m: Messages, rows: np.ndarray) -> np.ndarray:
    """Replies cut off: at the token limit, or by a failure."""
    return np.isin(m.ending[rows], (CUT, FAILED))


def _chain(m: Messages, rows: np.ndarray) -> pa.Array:
    """Math replies' chains of reasoning, about their length; where looping, two steps and then one passage
    over and over; where cut off, ending part-way through its next step (or passage)."""
    chars, loops, stopped = m.chars[rows], m.looping[rows], _stopped(m, rows)
    steps = texts.lines_for(chars, 0, texts.REASONING_LINE) + 1
    chain = texts.reasoning(m.task[rows], np.where(loops, 2, steps), m.start[rows])
    passage = texts.LOOPS.take(m.variant[rows])
    times = np.where(loops, np.ceil(np.maximum(chars, 1200) / pc.utf8_length(passage).to_numpy()), 0)
    times = times.astype(np.int64)
    loop = texts.joined(passage, np.repeat(np.arange(len(rows)), times), times, "")
    chain = pc.if_else(pa.array(loops), texts.concat(chain, "\n", loop), chain)
    cut = pc.if_else(
        pa.array(loops),
        texts.LOOPS.cut().take(m.variant[rows]),
        texts.REASONING.cut().take(m.start[rows] + steps),
    )
    return pc.if_else(
        pa.array(stopped), texts.concat(chain, pc.if_else(pa.array(loops), "", "\n"), cut), chain
    )


def _thought(m: Messages, rows: np.ndarray) -> pa.Array:
    """Other replies' text: a lead sentence about the tool called next and a few more (half as many, and one cut
    off part-way, where the reply was cut off)."""
    stopped = _stopped(m, rows)
    chars = np.where(stopped, m.chars[rows] // 2, m.chars[rows])
    lead = texts.reply_lead(m.tool[rows], m.names["tools"], m.task[rows], m.variant[rows])
    counts = texts.lines_for(chars, 60, texts.THOUGHTS)
    body = texts.THOUGHTS.run(counts, m.start[rows], " ")
    cut = pc.if_else(pa.array(stopped), texts.THOUGHTS.cut().take(m.start[rows] + counts), "")
    return texts.concat(lead, " ", body, pc.if_else(pa.array(stopped), " ", ""), cut)


def _tool_calls(m: Messages, rows: np.ndarray) -> pa.Array:
    """A reply's tool call as the collectors store it: ``[{"id", "name", "arguments"}]`` (JSON)."""
    tools = m.names["tools"]
    out = _Column(len(rows))
    for i, name in enumerate(tools):
        mine = np.flatnonzero(m.tool[rows] == i)
        if not len(mine):
            continue
        r = rows[mine]
        ids = texts.formatted(lambda k: f"call_{k}", m.value[r][:, None])
        args = texts.arguments_of(name, m.failing[r], m.task[r], m.variant[r])
        out.put(mine, texts.concat('[{"id":"', ids, f'","name":{texts.dumps(name)},"arguments":', args, "}]"))
    return out.array()


def _judge_prompts(m: Messages, replies: np.ndarray, content: pa.Array) -> pa.Array:
    """Judge prompts: the rubric, the question, and the final reply (of ``content``, the replies' texts) of the
    rollout each judges."""
    rows = np.flatnonzero(m.what == JUDGE_PROMPT)
    last = np.full(len(m.names["rollout_ids"]), -1, dtype=np.int64)
    np.maximum.at(last, m.rollout[replies], np.arange(len(replies)))  # a rollout's replies come in turn order
    index = last[m.rollout[rows]]
    padded = pa.concat_arrays([content, pa.nulls(1, pa.string())])
    answer = padded.take(pa.array(np.where(index >= 0, index, len(content)), pa.int64()))
    question = texts.formatted(texts.question, m.task[rows][:, None])
    return texts.concat(texts.JUDGE_RUBRIC, "Question:\n", question, "\n\nResponse:\n", answer)


# --- the two ways out ---------------------------------------------------------------------------------------------

# Each source's keyword argument of the helpers (collectors.spans.CONTENT_FIELDS); a judge's are prompt= and
# rationale=.
_ARGUMENT = {"system": "system", "input": "input", "tool_arguments": "arguments", "output": "output", "tool_result": "result"}  # fmt: skip
_JUDGE_ARGUMENT = {"input": "prompt", "output": "rationale"}


def helper_arguments(m: Messages) -> dict[str, dict[int, dict]]:
    """What the normal mode passes the helpers (``span.set(**arguments)``), by process and span id: text for
    a system prompt, task, tool call or result and judge prompt, GenAI's message shape for a reply (its
    reasoning, text and tool call as parts, and its finish reason)."""
    said = {k: v.to_pylist() for k, v in texts_of(m).items()}
    processes, out = m.names["processes"], {}
    judge = m.names["span_names"].index("rl.judge")
    for i in range(len(m)):
        source = SOURCES[m.source[i]]
        name = (_JUDGE_ARGUMENT if m.span_name[i] == judge else _ARGUMENT)[source]
        value = _reply(said, i) if source == "output" else said["content"][i]
        if value is not None:
            out.setdefault(processes[m.process[i]], {}).setdefault(int(m.span_id[i]), {})[name] = value
    return out


def _reply(said: dict[str, list], i: int) -> dict:
    """A reply as GenAI's output message: reasoning, text and tool call parts, and the finish reason."""
    parts = []
    if said["reasoning"][i] is not None:
        parts.append({"type": "reasoning", "content": said["reasoning"][i]})
    if said["content"][i] is not None:
        parts.append({"type": "text", "content": said["content"][i]})
    if said["tool_calls"][i] is not None:
        parts += [{"type": "tool_call", **call} for call in json.loads(said["tool_calls"][i])]
    return {"role": "assistant", "parts": parts, "finish_reason": said["finish_reason"][i]}


def table(m: Messages, max_chars: int = DEFAULT_MAX_CHARS) -> pa.Table:
    """The messages as rows of the ``messages`` dataset: what the collectors make of the helper arguments
    (``collectors.content``: one row per message, each text capped at ``max_chars``), built column-wise."""
    from rollscope.store.schema import MESSAGES_SCHEMA

    m = _in_render_order(m)
    n = len(m)
    said = texts_of(m)
    source = pa.array(SOURCES, pa.string()).take(pa.array(m.source))
    tool_rows = np.isin(m.source, (SOURCES.index("tool_arguments"), SOURCES.index("tool_result")))
    lengths = [
        pc.fill_null(pc.utf8_length(said[k]), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        for k in _CAPPED
    ]
    trace = np.ascontiguousarray(m.trace_id.astype(">u8")).tobytes()
    columns = {
        "trace_id": pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(trace)]),
        "span_id": pa.array(m.span_id, pa.uint64()),
        "start_ns": pa.array(m.start_ns, pa.int64()),
        "rollout_id": pa.array(m.names["rollout_ids"], pa.string()).take(pa.array(m.rollout)),
        "turn_index": pa.array(m.turn_index, pa.int64(), mask=m.turn_index < 0),
        "span_name": pa.array(m.names["span_names"], pa.string()).take(pa.array(m.span_name)),
        "ordinal": pa.array(m.ordinal, pa.int64()),
        "source": source,
        "message_index": pa.array(np.zeros(n, dtype=np.int64)),
        "role": pa.array(ROLES, pa.string()).take(pa.array(m.source)),
        **{k: said[k] for k in ("content", "reasoning", "tool_calls")},
        "tool_name": pa.array(m.names["tools"] + [None], pa.string()).take(
            pa.array(np.where(tool_rows, m.tool, len(m.names["tools"])))
        ),
        "tool_call_id": pa.nulls(n, pa.string()),
        "finish_reason": said["finish_reason"],
        "tokens": pa.array(m.tokens, pa.int64(), mask=m.tokens < 0),
        "content_chars": pa.array(sum(lengths)),
        "truncated": pa.array(np.zeros(n, dtype=bool)),
    }
    out = pa.Table.from_arrays([columns[f.name] for f in MESSAGES_SCHEMA], schema=MESSAGES_SCHEMA)
    long = np.flatnonzero(np.max(lengths, axis=0) > max_chars) if n else []
    return _capped(out, long, max_chars) if len(long) else out


def _in_render_order(m: Messages) -> Messages:
    """The rows grouped as ``texts_of`` renders them (by what, then tool or environment kind; a tool's results by
    failed or not and argument set), so most of its columns are their parts one after the other, not a take that
    copies every text again. The order of a table's rows is no one's business (a reader orders a transcript)."""
    result = m.what == RESULT
    order = np.lexsort(
        (
            np.where(result, m.variant % 4, 0),
            np.where(result, m.ending != 0, 0),
            np.where(np.isin(m.what, (ARGUMENTS, RESULT)), m.tool, m.kind),
            m.what,
        )
    )
    columns = {f.name: getattr(m, f.name)[order] for f in fields(Messages) if f.name != "names"}
    return Messages(**columns, names=m.names)


_CAPPED = ("content", "reasoning", "tool_calls")  # the texts the capture cap applies to (collectors.content)


def _capped(out: pa.Table, rows: np.ndarray, max_chars: int) -> pa.Table:
    """``out`` with the texts of ``rows`` capped as the collectors cap them (``content.capped``): the few
    messages longer than the cap, one by one."""
    columns = {k: out.column(k).to_pylist() for k in (*_CAPPED, "truncated")}
    for row in rows.tolist():
        message = capped({k: columns[k][row] for k in _CAPPED}, max_chars)
        for k in (*_CAPPED, "truncated"):
            columns[k][row] = message[k]
    for k, values in columns.items():
        out = out.set_column(out.schema.get_field_index(k), k, pa.array(values, out.schema.field(k).type))
    return out


# --- the ground truth -------------------------------------------------------------------------------------------

FLAGS = ("truncated", "answer_missing", "looping", "tool_error_rollouts", "tool_errors")


class Truth:
    """The transcript flags per consuming step (docs/simulator.md, ``transcripts``): how many of the step's
    rollouts (all have transcripts) the simulator cut at the token limit, left without a readable answer, made
    loop, and gave failing tool calls (and how many calls)."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.messages = 0

    def add_step(self, p: StepPlan, flags: dict[str, np.ndarray] | None, messages: Messages | None) -> None:
        if flags is None:
            return
        self.messages += len(messages) if messages is not None else 0
        row = {"train_step": p.step, "rollouts": len(p.rollouts)}
        row.update({k: int(flags[k].sum()) for k in ("truncated", "answer_missing", "looping")})
        row["tool_error_rollouts"] = int((flags["tool_errors"] > 0).sum())
        row["tool_errors"] = int(flags["tool_errors"].sum())
        self.steps.append(row)

    def document(self) -> dict | None:
        if not self.steps:
            return None
        run = {k: sum(s[k] for s in self.steps) for k in ("rollouts", *FLAGS)}
        return {"messages": self.messages, "run": run, "by_step": self.steps}
