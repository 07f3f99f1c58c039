"""A rollout's conversation as people read it, the same on the Rollouts page and in `rollscope show`.

``queries.transcripts.conversation`` gives one row per message beside its span's accounting; here those rows
become ``Block``s (one span each: a turn, the tool calls it made, a judge, a verifier), turns of blocks (a turn
and the tool calls that follow it), their header lines, the terminal's text, the ``--json`` object and the
diff of two transcripts. Nothing here renders markup: transcript text is untrusted data (an agent's tool output
may hold HTML, script, markdown or terminal escapes), so the page shows it in text elements only and the
terminal gets it with control characters made visible (``plain``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rollscope import formats

SPAN_COLUMNS = (  # a span's accounting, the same on each of its message rows
    "kind", "span_name", "turn_index", "start_s", "duration_s", "input_tokens", "cached_input_tokens",
    "output_tokens", "prefill_time_s", "decode_time_s", "ttft_s", "spec_draft_tokens", "spec_accepted_tokens",
    "acceptance", "request_model", "status_code", "tool_name", "tool_exit_code", "observation_tokens",
    "reward_name", "reward", "judge_status",
)  # fmt: skip
MESSAGE_COLUMNS = (
    "ordinal", "source", "role", "content", "reasoning", "tool_calls", "tool_call_id", "finish_reason",
    "tokens", "truncated", "content_chars", "shown_cut",
)  # fmt: skip
# What a message is, by the span it came from and its source: the label a reader sees above its text.
LABELS = {
    ("judge", "input"): "judge prompt",
    ("judge", "output"): "judge rationale",
    ("tool", "tool_arguments"): "tool call",
    ("tool", "tool_result"): "tool result",
}
SOURCE_LABELS = {"system": "system prompt", "tool_arguments": "tool call", "tool_result": "tool result"}
ROLE_LABELS = {"tool": "tool result", "ipython": "tool result"}
WHY_NO_CONTENT = "capture off, or the rollout's group sampled out"
NO_CONTENT = f"(no content recorded: {WHY_NO_CONTENT})"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@dataclass
class Block:
    """One span of the rollout with its messages, in order."""

    span_id: int | None
    span: dict
    messages: list[dict] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.span.get("kind") or "other"


@dataclass
class Turn:
    """A turn's block and the tool calls after it; or (``turn`` False) what comes before the first turn, or
    the scoring after the last."""

    turn: bool
    blocks: list[Block] = field(default_factory=list)

    @property
    def index(self):
        return self.blocks[0].span.get("turn_index") if self.turn else None


def value(x):
    """A frame's cell as a plain value: None for NULL / NaN / NA."""
    return None if formats.missing(x) else x.item() if hasattr(x, "item") else x


def blocks(frame) -> list[Block]:
    """The conversation's rows (one rollout's) grouped by span, in reading order."""
    found: list[Block] = []
    plain_rows = frame.astype(object).where(frame.notna(), None)  # NULL, NaN and NA as None, at once
    for row in plain_rows.to_dict("records"):
        if not found or found[-1].span_id != row["span_id"]:
            found.append(Block(row["span_id"], {k: row.get(k) for k in SPAN_COLUMNS}))
        if row.get("source") is not None:
            found[-1].messages.append({k: row.get(k) for k in MESSAGE_COLUMNS})
    return found


def turns(found: list[Block]) -> list[Turn]:
    """Blocks gathered by turn: each turn block starts one, the tool calls after it belong to it; judges and
    verifiers after the last turn are the rollout's scoring (a Turn that is not a turn)."""
    gathered: list[Turn] = []
    for block in found:
        last = gathered[-1] if gathered else None
        if block.kind == "turn":
            gathered.append(Turn(True, [block]))
        elif last is not None and (not last.turn or block.kind in ("tool", "other")):
            last.blocks.append(block)
        else:
            gathered.append(Turn(False, [block]))
    return gathered


def label(block: Block, message: dict, quote: Callable[[str], str] | None = None) -> str:
    """What a message is: "system prompt", "user", "assistant", "tool result", "judge rationale" … (a role
    the job named otherwise written by ``quote``, as in ``header``)."""
    known = LABELS.get((block.kind, message.get("source")))
    role = str(message.get("role") or "message")
    if known or message.get("source") in SOURCE_LABELS or role in ROLE_LABELS:
        return known or SOURCE_LABELS.get(message.get("source")) or ROLE_LABELS[role]
    return role if role in ("user", "assistant", "system") else (quote or plain)(role)


def header(block: Block, quote: Callable[[str], str] | None = None) -> str:
    """The span's one-line accounting: ``turn 3 · 2,345 in (2,000 cached) · 312 out · prefill 120 ms ·
    decode 2.3 s · speculative 78.0 % accepted`` (a tool call's exit code and time, a judge's score).
    ``quote`` writes the names the job gave (tool, verifier, judge model): ``plain`` for a terminal, a code
    span for a page's markdown."""
    quote = quote or plain
    s = block.span
    parts = [title(block, quote)]
    if block.kind == "turn":
        parts += _turn_parts(s)
    elif block.kind == "tool":
        if s.get("tool_exit_code") is not None:
            parts.append(f"exit {s['tool_exit_code']}")
        if s.get("observation_tokens") is not None:
            parts.append(f"{formats.count(s['observation_tokens'])} tokens")
    elif block.kind in ("judge", "reward"):
        parts.append(f"reward {formats.number(s.get('reward'))}")
        if s.get("judge_status") not in (None, "ok"):
            parts.append(quote(str(s["judge_status"])))
    if s.get("duration_s") is not None:
        parts.append(f"{formats.seconds(s['duration_s'])}")
    if s.get("status_code") == "error":
        parts.append("error")
    return " · ".join(parts)


def title(block: Block, quote: Callable[[str], str] | None = None) -> str:
    quote = quote or plain
    s = block.span
    if block.kind == "turn":
        return f"turn {s['turn_index']}" if s.get("turn_index") is not None else "turn"
    if block.kind == "tool":
        return f"tool {quote(str(s.get('tool_name') or 'call'))}"
    if block.kind == "reward":
        return "verifier" + (f" {quote(str(s['reward_name']))}" if s.get("reward_name") else "")
    if block.kind == "judge":
        return "judge" + (f" {quote(str(s['request_model']))}" if s.get("request_model") else "")
    return quote(str(s.get("span_name") or "span"))


def _turn_parts(s: dict) -> list[str]:
    parts = []
    if s.get("input_tokens") is not None:
        cached = s.get("cached_input_tokens")
        parts.append(
            f"{formats.count(s['input_tokens'])} in"
            + (f" ({formats.count(cached)} cached)" if cached is not None else "")
        )
    if s.get("output_tokens") is not None:
        parts.append(f"{formats.count(s['output_tokens'])} out")
    for name, key in (("prefill", "prefill_time_s"), ("decode", "decode_time_s")):
        if s.get(key) is not None:
            parts.append(f"{name} {formats.seconds(s[key])}")
    if s.get("acceptance") is not None:
        parts.append(f"speculative {formats.rate(s['acceptance'])} accepted")
    return parts


def tool_calls(message: dict) -> list[str]:
    """A message's tool calls as ``name(arguments)`` lines (its JSON shown as it is when it is not a list)."""
    text = message.get("tool_calls")
    if not text:
        return []
    try:
        calls = json.loads(text)
    except ValueError:  # cut for showing, or not JSON: as it is
        return [text]
    if not isinstance(calls, list):
        return [text]
    return [f"{c.get('name')}({_arguments(c.get('arguments'))})" for c in calls if isinstance(c, dict)]


def _arguments(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def plain(text: str) -> str:
    """Text safe for a terminal: control characters (an ANSI escape, a carriage return that overwrites the
    line, bidirectional overrides) shown as ``\\x1b`` and the like; newlines and tabs kept."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# --- the terminal -----------------------------------------------------------------------------------------


def text(found: list[Block]) -> str:
    """The transcript as `rollscope show` prints it: a rule and header line per span, each message's label
    and text (texts cut where the query cut them, its marker saying how much is not shown)."""
    lines: list[str] = []
    for block in found:
        lines.append(f"── {header(block)} " + "─" * max(3, 100 - len(header(block)) - 4))
        for message in block.messages:
            lines += _message_lines(block, message)
        if not block.messages and block.kind != "reward":  # a verifier's score is its content
            lines.append(NO_CONTENT)
        lines.append("")
    return "\n".join(lines)


def _message_lines(block: Block, message: dict) -> list[str]:
    extra = [f"finish: {message['finish_reason']}"] if message.get("finish_reason") else []
    if message.get("truncated"):
        extra.append(f"capped at capture: {formats.count(message.get('content_chars'))} characters in all")
    lines = [f"[{label(block, message)}]" + (f" ({'; '.join(plain(e) for e in extra)})" if extra else "")]
    if message.get("reasoning"):
        lines += ["(reasoning)", plain(message["reasoning"])]
    if message.get("content"):
        lines.append(plain(message["content"]))
    lines += [f"→ {plain(call)}" for call in tool_calls(message)]
    return lines


def as_json(rollout: dict, stage: dict, scores, found: list[Block]) -> dict:
    """`rollscope show --json`: the rollout, its funnel stage, its scores and its spans with their messages
    (keys documented in docs/transcripts.md)."""
    return {
        "rollout": {k: _jsonable(v) for k, v in rollout.items()},
        "stage": {k: _jsonable(v) for k, v in stage.items()},
        "scores": [{k: _jsonable(value(v)) for k, v in r.items()} for r in scores.to_dict("records")],
        "spans": [
            {
                "span_id": b.span_id,
                **{k: _jsonable(v) for k, v in b.span.items()},
                "messages": [{k: _jsonable(v) for k, v in m.items() if k != "shown_cut"} for m in b.messages],
            }
            for b in found
        ],
    }


def _jsonable(x):
    x = value(x)
    return x.isoformat() if hasattr(x, "isoformat") else x


# --- comparing two transcripts ----------------------------------------------------------------------------


def diff(a: list[Block], b: list[Block], a_name: str, b_name: str) -> str:
    """A unified diff of two transcripts' texts (spans by kind and index, each message's label and text; no
    times or token counts, which always differ), for the group view's comparison."""
    return "\n".join(difflib.unified_diff(_comparable(a), _comparable(b), a_name, b_name, lineterm="", n=2))


def _comparable(found: list[Block]) -> list[str]:
    lines = []
    for block in found:
        lines.append(f"── {title(block)}")
        for message in block.messages:
            lines.append(f"[{label(block, message)}]")
            for part in (message.get("reasoning"), message.get("content"), *tool_calls(message)):
                if part:
                    lines += plain(part).splitlines()
    return lines
