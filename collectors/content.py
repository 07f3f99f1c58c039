"""Transcripts: content attributes and events of finished spans into rows of the ``messages`` dataset.

Content travels as OpenTelemetry GenAI attributes (``gen_ai.input.messages``, ``gen_ai.output.messages``, ...;
``rollscope.semconv`` lists them) or GenAI's older span events. ``rows`` sets them aside while it converts a
batch (they never reach the spans dataset), and the writer of the batch (the exporter, the receiver) turns them
into message rows here, under its ``ContentPolicy``, one row per message:

* **normalized**: GenAI's parts (text, reasoning, tool calls, tool call responses), OpenAI's chat shape and
  plain text all become ``role``, ``content``, ``reasoning``, ``tool_calls`` and ``finish_reason``;
* **once per conversation**: a span that re-sends its trace's whole history (a plain GenAI chat span does) is
  stored from its first message the trace's previous span had not already stored (``History``), so storage
  grows with the transcript, not its square; a repeated system prompt is stored once;
* **capped**: each text longer than ``max_chars`` keeps its head and tail around a marker that says how much
  was cut; ``content_chars`` keeps the original length and ``truncated`` says it happened;
* **sampled by group** (``sample`` < 1): a group's rollouts are kept or not together (a hash of the group id, so
  every process decides alike and siblings stay comparable); a rollout outside the sample is still kept when it
  failed or went unscored, which needs its ``rl.rollout`` span, so its rows wait for it (``Sampler``).

This runs on the writer's background thread, never on the job's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rollscope import semconv
from rollscope.settings import Settings

# The order a span's messages are shown in: the instructions, what was sent, the call, the reply, its result.
_SOURCE_RANK = {"system": 0, "input": 1, "tool_arguments": 2, "output": 3, "tool_result": 4}
_DEFAULT_ROLE = {
    "system": "system",
    "input": "user",
    "output": "assistant",
    "tool_arguments": "assistant",
    "tool_result": "tool",
}
_MESSAGE_KEYS = (
    "source",
    "message_index",
    "role",
    "content",
    "reasoning",
    "tool_calls",
    "tool_name",
    "tool_call_id",
    "finish_reason",
)
DEFAULT_MAX_CHARS = 32_768
EVENT = "event:"  # prefix of a content entry that came from a span event (its name follows)


@dataclass(frozen=True)
class ContentPolicy:
    """What a writer keeps of content: on or off, the cap on each text, the share of groups kept."""

    enabled: bool = True
    max_chars: int = DEFAULT_MAX_CHARS
    sample: float = 1.0

    @classmethod
    def of(cls, settings: Settings) -> ContentPolicy:
        """The policy the settings say (``ROLLSCOPE_CAPTURE_CONTENT`` and its like, or their arguments)."""
        return cls(settings.capture_content, settings.content_max_chars, settings.content_sample)


OFF = ContentPolicy(enabled=False)


# --- what helpers and adapters send --------------------------------------------------------------------------


def encode(value: object, source: str) -> str:
    """A helper's ``input=`` / ``output=`` / ``system=`` value as the attribute GenAI defines: JSON messages
    (``structured``'s, as text)."""
    return _dumps(structured(value, source))


def structured(value: object, source: str) -> list:
    """A helper's content value as GenAI's messages, before JSON: text is one message of the source's role; a
    dict is one message, a list several (GenAI's parts shape or OpenAI's chat shape, kept as given); anything
    else is text. A producer that hands its spans to rollscope's own processor (``SpanColumns``: the TRL
    adapter) passes these lists as the attribute's value, which the writer reads as it would their JSON, without
    writing the text on the job's thread to parse it again on the writer's."""
    if isinstance(value, str):
        if source == "system":
            return [{"type": "text", "content": value}]
        return [{"role": _DEFAULT_ROLE[source], "parts": [{"type": "text", "content": value}]}]
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list | tuple):
        return list(value)
    return structured(str(value), source)


def encode_text(value: object) -> str:
    """A tool's arguments or result as the attribute value: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else _dumps(value)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


# --- reading content into messages ---------------------------------------------------------------------------


def messages_of(entries: Iterable[tuple[str, object]]) -> list[dict]:
    """A span's content entries (attribute name or ``event:NAME``, value) as messages in reading order."""
    found: list[tuple[int, int, dict]] = []
    indexed: dict[str, dict[int, dict]] = {}
    for position, (name, value) in enumerate(entries):
        if name.startswith(EVENT):
            found += [
                (_SOURCE_RANK[m["source"]], position, m) for m in _from_event(name[len(EVENT) :], value)
            ]
        elif name in semconv.CONTENT_SOURCES:
            source = semconv.CONTENT_SOURCES[name]
            found += [(_SOURCE_RANK[source], position, m) for m in _from_attribute(source, value)]
        else:
            _collect_indexed(indexed, name, value)
    for source, by_index in indexed.items():
        found += [(_SOURCE_RANK[source], i, _message(source, i, m)) for i, m in sorted(by_index.items())]
    found.sort(key=lambda item: (item[0], item[1]))
    return [m for _, _, m in found]


def _from_attribute(source: str, value: object) -> list[dict]:
    if source in ("tool_arguments", "tool_result"):
        return [_blank(source, 0, _DEFAULT_ROLE[source], content=_text(value))]
    parsed = _parse(value)
    if source == "system":
        return [_blank("system", 0, "system", content=_parts_text(parsed))]
    if isinstance(parsed, dict):
        parsed = [parsed]
    if not isinstance(parsed, list):
        return [_blank(source, 0, _DEFAULT_ROLE[source], content=_text(parsed))]
    return [_message(source, i, m) for i, m in enumerate(parsed)]


def _from_event(name: str, attributes: object) -> list[dict]:
    """A GenAI content event (its attributes) as messages."""
    attributes = attributes if isinstance(attributes, Mapping) else {}
    if name == semconv.CONTENT_DETAILS_EVENT:
        return messages_of((k, v) for k, v in attributes.items() if k in semconv.CONTENT_SOURCES)
    source, role = semconv.CONTENT_EVENTS[name]
    body = _parse(attributes.get("message")) if "message" in attributes else dict(attributes)
    if not isinstance(body, dict):
        body = {"content": body}
    body.setdefault("role", attributes.get("gen_ai.role") or role)
    body.setdefault("finish_reason", attributes.get("finish_reason"))
    if "id" in attributes and "tool_call_id" not in body:
        body["tool_call_id"] = attributes["id"]
    body.pop("id", None)
    return [_message(source, int(attributes.get("index", 0) or 0) if source == "output" else 0, body)]


def _collect_indexed(indexed: dict, name: str, value: object) -> None:
    """``gen_ai.prompt.3.content`` and its like, gathered by index into message dicts."""
    for prefix, source in semconv.CONTENT_INDEXED_PREFIXES.items():
        if name == prefix.rstrip("."):
            indexed.setdefault(source, {})[0] = {"content": value}
            return
        if name.startswith(prefix):
            index, _, field = name[len(prefix) :].partition(".")
            if index.isdigit() and field:
                message = indexed.setdefault(source, {}).setdefault(int(index), {})
                message[field] = value
            return


def _message(source: str, index: int, raw: object) -> dict:
    """One message of any accepted shape (GenAI parts, OpenAI chat, text) as a row's fields."""
    if not isinstance(raw, Mapping):
        return _blank(source, index, _DEFAULT_ROLE[source], content=_text(raw))
    text = _plain_text(raw)
    if text is not None:  # most messages: the same row as below, without its walk over every shape
        return _blank(source, index, str(raw["role"] or _DEFAULT_ROLE[source]), content=text)
    role = str(raw.get("role") or _DEFAULT_ROLE[source])
    texts, reasoning, calls = [], [], []
    tool_call_id = raw.get("tool_call_id")
    for part in raw.get("parts") or ():
        kind = part.get("type") if isinstance(part, Mapping) else "text"
        if not isinstance(part, Mapping):
            texts.append(_text(part))
        elif kind == "text":
            texts.append(_text(part.get("content", part.get("text"))))
        elif kind == "reasoning":
            reasoning.append(_text(part.get("content")))
        elif kind == "tool_call":
            calls.append(_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif kind == "tool_call_response":
            texts.append(_text(part.get("response", part.get("result"))))
            tool_call_id = tool_call_id or part.get("id")
        else:
            texts.append(f"[{kind} {part.get('mime_type') or part.get('modality') or ''}]".replace(" ]", "]"))
    content = raw.get("content")
    if isinstance(content, list):  # OpenAI's content parts
        texts += [_text(c.get("text", c.get("content")) if isinstance(c, Mapping) else c) for c in content]
    elif content is not None:
        texts.append(_text(content))
    for key in ("reasoning_content", "reasoning"):
        if isinstance(raw.get(key), str):
            reasoning.append(raw[key])
    calls += [_openai_call(c) for c in _parse(raw.get("tool_calls")) or () if isinstance(c, Mapping)]
    return _blank(
        source,
        index,
        role,
        content="\n".join(t for t in texts if t) if texts else None,
        reasoning="\n".join(reasoning) if reasoning else None,
        tool_calls=_dumps(calls) if calls else None,
        tool_call_id=_text(tool_call_id) if tool_call_id is not None else None,
        tool_name=_text(raw["name"]) if role == "tool" and raw.get("name") else None,
        finish_reason=_text(raw["finish_reason"]) if raw.get("finish_reason") else None,
    )


def _plain_text(raw: Mapping) -> str | None:
    """The text of a message that is a role and one text, nothing else: GenAI's ``{"role", "parts": [{"type":
    "text", "content"}]}`` or the chat shape's ``{"role", "content"}`` (a role other than "tool": a tool's names
    its tool); None for any other shape."""
    if len(raw) != 2 or "role" not in raw or raw["role"] == "tool":
        return None
    content, parts = raw.get("content"), raw.get("parts")
    if type(content) is str:
        return content
    if type(parts) is list and len(parts) == 1:
        part = parts[0]
        text = part.get("content") if type(part) is dict and len(part) == 2 else None
        if type(text) is str and part.get("type") == "text":
            return text
    return None


def _blank(source: str, index: int, role: str, **fields) -> dict:
    row = dict.fromkeys(_MESSAGE_KEYS)
    row.update(source=source, message_index=index, role=role, **fields)
    return row


def _call(call_id: object, name: object, arguments: object) -> dict:
    return {"id": call_id, "name": name, "arguments": _parse(arguments)}


def _openai_call(call: Mapping) -> dict:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else call
    return _call(call.get("id"), function.get("name"), function.get("arguments"))


def _parse(value: object) -> object:
    """JSON text as its value; other values (and text that is not JSON) as they are."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _dumps(value)


def _parts_text(parsed: object) -> str | None:
    """System instructions (text, or a list of parts or messages) as one text."""
    if isinstance(parsed, list):
        return "\n".join(m["content"] for m in (_message("system", 0, p) for p in parsed) if m["content"])
    return _text(parsed.get("content") if isinstance(parsed, Mapping) else parsed)


# --- the cap --------------------------------------------------------------------------------------------------


def cap(text: str | None, max_chars: int) -> tuple[str | None, bool]:
    """``text`` within ``max_chars``: its head and tail kept (a tool log's failures are at its end) around a
    marker saying how much was cut; and whether it was cut."""
    if text is None or len(text) <= max_chars:
        return text, False
    marker = f"\n…[{len(text) - max_chars:,} of {len(text):,} characters cut by rollscope]…\n"
    keep = max(0, max_chars - len(marker))
    head = keep * 3 // 4
    return text[:head] + marker + text[len(text) - (keep - head) :], True


def capped(message: dict, max_chars: int) -> dict:
    """The message with each of its texts capped, ``content_chars`` (their length before) and ``truncated``."""
    total, cut_any = 0, False
    for key in ("content", "reasoning", "tool_calls"):
        text = message[key]
        if text is not None:
            total += len(text)
            message[key], cut = cap(text, max_chars)
            cut_any = cut_any or cut
    message["content_chars"] = total
    message["truncated"] = cut_any
    return message


# --- once per conversation ------------------------------------------------------------------------------------


class History:
    """Per trace, what its last span with content sent and got: a span whose input starts with all of that
    re-sent the conversation, and only what follows is stored. Bounded (least recently used traces go)."""

    def __init__(self, traces: int = 100_000):
        self._last: OrderedDict[bytes, tuple[tuple, object]] = OrderedDict()
        self._traces = traces

    def elide(self, trace_id: bytes, messages: list[dict]) -> list[dict]:
        """``messages`` without the re-sent history (and a system prompt equal to the trace's last one)."""
        inputs = [_key(m) for m in messages if m["source"] == "input"]
        outputs = [_key(m) for m in messages if m["source"] == "output"]
        system = tuple(_key(m) for m in messages if m["source"] == "system")
        previous, previous_system = self._last.pop(trace_id, ((), None))
        skip = (
            len(previous)
            if previous and len(inputs) > len(previous) and tuple(inputs[: len(previous)]) == previous
            else 0
        )
        if inputs or outputs:
            self._last[trace_id] = (tuple(inputs + outputs), system or previous_system)
        elif previous or previous_system:
            self._last[trace_id] = (previous, system or previous_system)
        if len(self._last) > self._traces:
            self._last.popitem(last=False)
        kept, seen_inputs = [], 0
        for m in messages:
            if m["source"] == "input":
                seen_inputs += 1
                if seen_inputs <= skip:
                    continue
            elif m["source"] == "system" and system and system == previous_system:
                continue
            kept.append(m)
        return kept


def _key(message: dict) -> tuple:
    return (
        message["role"],
        message["content"],
        message["reasoning"],
        message["tool_calls"],
        message["tool_call_id"],
    )


# --- sampling by group ----------------------------------------------------------------------------------------


def group_kept(run_id: str, group: str, share: float) -> bool:
    """Whether a group is in the sample: a hash of run and group, so every process (and the receiver) agrees."""
    digest = hashlib.blake2b(f"{run_id}\0{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2**64


@dataclass
class _Outcome:
    group: str | None
    lost: bool  # failed, aborted, or unscored: kept whatever its group


class Sampler:
    """Keeps a share of groups' content, and the content of every rollout that failed or went unscored.

    A rollout's turns end before its ``rl.rollout`` span does, and that span carries what the decision needs
    (its group, status and reward), so rows of a rollout the group hash leaves out wait here until it comes:
    at most ``wait_s`` seconds and ``max_rows`` rows (past either, the oldest are decided without it, by the
    hash of their rollout or trace). ``dropped`` counts the rows left out."""

    def __init__(self, share: float, *, wait_s: float = 900.0, max_rows: int = 200_000, clock=time.monotonic):
        self.share = share
        self.wait_s = wait_s
        self.max_rows = max_rows
        self._clock = clock
        self._outcomes: OrderedDict[tuple[str, str], _Outcome] = OrderedDict()
        self._waiting: list[tuple[float, str, dict]] = []  # (since, run, row)
        self.dropped = 0

    def learn(self, run_id: str, rollouts: Iterable[tuple[str, str | None, bool]]) -> None:
        """Outcomes of finished rollouts: (rollout id, group id, lost)."""
        for rollout_id, group, lost in rollouts:
            self._outcomes[(run_id, rollout_id)] = _Outcome(group, lost)
        while len(self._outcomes) > 1_000_000:
            self._outcomes.popitem(last=False)

    def keep(self, run_id: str, rows: list[dict]) -> list[tuple[str, dict]]:
        """Rows (of ``run_id``, and any waiting rows now decided) to write now, each with its run."""
        now = self._clock()
        waiting, self._waiting = self._waiting, []
        out: list[tuple[str, dict]] = []
        for since, run, row in [*waiting, *((now, run_id, r) for r in rows)]:
            verdict = self._verdict(run, row, force=now - since >= self.wait_s)
            if verdict is None:
                self._waiting.append((since, run, row))
            elif verdict:
                out.append((run, row))
            else:
                self.dropped += 1
        while len(self._waiting) > self.max_rows:
            since, run, row = self._waiting.pop(0)
            if self._verdict(run, row, force=True):
                out.append((run, row))
            else:
                self.dropped += 1
        return out

    def _verdict(self, run: str, row: dict, *, force: bool) -> bool | None:
        rollout = row.get("rollout_id")
        outcome = self._outcomes.get((run, rollout)) if rollout is not None else None
        if outcome is not None:
            return outcome.lost or group_kept(run, outcome.group or rollout, self.share)
        if rollout is None or force:  # no rollout to wait for: its trace (one rollout, for most frameworks)
            return group_kept(run, rollout or row["trace_id"].hex(), self.share)
        return None

    @property
    def waiting(self) -> int:
        return len(self._waiting)


# --- a batch's content as messages tables ---------------------------------------------------------------------

_IDENTITY = (
    "trace_id",
    "span_id",
    "start_ns",
    "name",
    "rollout_id",
    "turn_index",
    "output_tokens",
    "observation_tokens",
    "tool_name",
    "tool_call_id",
)


@dataclass
class Found:
    """What a converted batch of spans offers the transcripts: the batch's spans table (every span, before it is
    split by run), each row's run, and for each span that carried content its row and content entries
    (attribute name or ``event:NAME``, value), which ``rows`` took out of the span."""

    table: object  # pa.Table with the spans schema
    run_of: Callable[[int], str | None]  # a row's run id
    rows: list[int] = field(default_factory=list)
    entries: list[list[tuple[str, object]]] = field(default_factory=list)

    def identities(self) -> dict[str, list]:
        """The identity columns (``_IDENTITY``) of the spans that carried content, as lists."""
        import pyarrow as pa

        return self.table.select(list(_IDENTITY)).take(pa.array(self.rows, pa.int64())).to_pydict()

    def rollouts(self) -> list[tuple[str, str, str | None, bool]]:
        """(run, rollout id, group id, lost) of the batch's ``rl.rollout`` spans: lost when it failed, was
        aborted or has no reward."""
        import pyarrow.compute as pc

        mask = pc.equal(self.table.column("name"), semconv.ROLLOUT)
        if not pc.any(mask).as_py():
            return []
        picked = self.table.select(["rollout_id", "group_id", "rollout_status", "status_code", "reward"])
        columns = picked.filter(mask).to_pydict()
        rows = pc.indices_nonzero(mask).to_pylist()
        return [
            (
                self.run_of(row),
                rollout,
                group,
                status not in (None, semconv.ROLLOUT_OK) or code == "error" or reward is None,
            )
            for row, rollout, group, status, code, reward in zip(rows, *columns.values(), strict=True)
        ]


class Transcripts:
    """One writer's content state under its policy: the history per trace, the sampler; makes the tables."""

    def __init__(self, policy: ContentPolicy):
        self.policy = policy
        self.history = History()
        self.sampler = Sampler(policy.sample) if policy.sample < 1 else None

    def tables(self, found: Found | None) -> dict[str, object]:
        """``messages`` rows per run (Arrow tables), none when capture is off or there is no content."""
        if not self.policy.enabled or found is None:
            return {}
        rows_by_run: dict[str, list[dict]] = {}
        if found.rows:
            for run, row in self._rows(found):
                rows_by_run.setdefault(run, []).append(row)
        if self.sampler is not None:
            rows_by_run = self._sampled(found, rows_by_run)
        return {run: _table(rows) for run, rows in rows_by_run.items() if run is not None and rows}

    def _rows(self, found: Found) -> Iterable[tuple[str, dict]]:
        spans = found.identities()
        max_chars = self.policy.max_chars
        for i, (row, entries) in enumerate(zip(found.rows, found.entries, strict=True)):
            identity = {key: spans[key][i] for key in _IDENTITY}
            messages = self.history.elide(identity["trace_id"], messages_of(entries))
            outputs = sum(m["source"] == "output" for m in messages)
            for ordinal, message in enumerate(messages):
                yield found.run_of(row), _row(identity, ordinal, capped(message, max_chars), outputs)

    def _sampled(self, found: Found, rows_by_run: dict[str, list[dict]]) -> dict[str, list[dict]]:
        by_run: dict[str, list] = {}
        for run, rollout, group, lost in found.rollouts():
            if run is not None and rollout is not None:
                by_run.setdefault(run, []).append((rollout, group, lost))
        for run, outcomes in by_run.items():
            self.sampler.learn(run, outcomes)
        kept: dict[str, list[dict]] = {}
        for run in set(rows_by_run) or {None}:
            for kept_run, row in self.sampler.keep(run, rows_by_run.get(run, [])):
                kept.setdefault(kept_run, []).append(row)
        return kept


def _row(identity: dict, ordinal: int, message: dict, outputs: int) -> dict:
    source = message["source"]
    tokens = None
    if source == "output" and outputs == 1:
        tokens = identity["output_tokens"]
    elif source == "tool_result":
        tokens = identity["observation_tokens"]
    if source in ("tool_arguments", "tool_result"):
        message["tool_name"] = message["tool_name"] or identity["tool_name"]
        message["tool_call_id"] = message["tool_call_id"] or identity["tool_call_id"]
    return {
        "trace_id": identity["trace_id"],
        "span_id": identity["span_id"],
        "start_ns": identity["start_ns"],
        "rollout_id": identity["rollout_id"],
        "turn_index": identity["turn_index"],
        "span_name": identity["name"],
        "ordinal": ordinal,
        **message,
        "tokens": tokens,
    }


def _table(rows: list[dict]):
    import pyarrow as pa

    from rollscope.store.schema import MESSAGES_SCHEMA

    return pa.Table.from_pylist(rows, schema=MESSAGES_SCHEMA)
