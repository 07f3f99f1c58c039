"""The Rollouts page's transcript views, drawn from ``queries.transcripts`` frames laid out by ``app.transcript``:
one rollout as a conversation turn by turn, its group's attempts side by side with a diff of two, and its task's
attempts across training.

Transcript text is untrusted data, and is drawn as text only: ``st.text`` and ``st.code`` (which never read
markup), never ``st.markdown``; a name the job gave (a tool, a role, a judge model) that goes into a markdown
line does so as a code span (``links.code``), where neither markdown nor Streamlit's ``:color[…]`` directives apply. A
long transcript is drawn a page of turns at a time, each text cut past ``transcripts.SHOWN_CHARS`` with its
whole a click away, and reasoning folded.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollscope.app import calls, charts, transcript
from rollscope.app.filters import Filters
from rollscope.app.links import code, viewer
from rollscope.queries import transcripts

TURNS_PER_PAGE = 10
WHOLE_CHARS = 250_000  # a text expanded whole is drawn up to this; `rollscope show --json` prints all of it
TALL_LINES = 24  # a text of more lines is drawn in a box of fixed height that scrolls
AVATARS = {
    "system": ":material/settings:",
    "user": "user",
    "assistant": "assistant",
    "tool": ":material/build:",
}
JUDGE_AVATAR = ":material/gavel:"
SIDE_BY_SIDE = 4  # attempts drawn next to each other at most


# --- one rollout ---------------------------------------------------------------------------------------------


def conversation(
    filters: Filters, rollout_id: str, frame: pd.DataFrame, marks: pd.DataFrame | None = None
) -> None:
    """The rollout turn by turn, a page of ``TURNS_PER_PAGE`` turns at a time. ``marks``: its turns' prefix
    continuity and compaction (``turn_index``, ``continuity_break``, ``compaction_tokens_before`` / ``_after``:
    issue 57's per-turn query), marked on each turn's header; None where the store cannot say."""
    gathered = transcript.turns(transcript.blocks(frame))
    messages = int(frame["source"].notna().sum())
    turns = sum(t.turn for t in gathered)
    cut = int(frame["shown_cut"].fillna(False).sum())
    st.caption(
        f"{charts.counted(turns, 'turn')} · {charts.counted(messages, 'message')}"
        + (f" · {cut} texts cut for showing (each has a “Whole text” switch)" if cut else "")
        + ". What to look for: the turn where the attempt went wrong, a tool error the agent ignored, an answer "
        "cut at the token limit (finish: length)."
    )
    if not messages:
        st.info(
            f"No transcript recorded for this rollout ({transcript.WHY_NO_CONTENT}); its turns' accounting:"
        )
    marked = _marks(marks)
    for turn in _page(gathered, rollout_id):
        with st.container(border=True):
            for block in turn.blocks:
                _block(
                    filters, rollout_id, block, marked.get(turn.index) if turn.turn else None, messages > 0
                )


def _page(gathered: list, rollout_id: str) -> list:
    """The turns of the page chosen (all of them when they fit on one)."""
    turn_starts = [i for i, t in enumerate(gathered) if t.turn] or [0]
    if len(turn_starts) <= TURNS_PER_PAGE:
        return gathered
    cuts = turn_starts[::TURNS_PER_PAGE]
    bounds = list(zip(cuts, [*cuts[1:], len(gathered)], strict=True))
    bounds[0] = (0, bounds[0][1])
    labels = [
        f"turns {n * TURNS_PER_PAGE + 1}–{min((n + 1) * TURNS_PER_PAGE, len(turn_starts))}"
        for n in range(len(cuts))
    ]  # noqa: E501
    chosen = st.select_slider(
        f"{len(turn_starts)} turns, {TURNS_PER_PAGE} at a time", labels, key=f"turn-page:{rollout_id}"
    )
    lo, hi = bounds[labels.index(chosen)]
    return gathered[lo:hi]


def _marks(marks: pd.DataFrame | None) -> dict:
    """Each marked turn's note: ``⟲ history prefilled again (why)``, ``✂ from a compacted context (N → M
    tokens)``."""
    if marks is None or marks.empty:
        return {}
    notes: dict = {}
    for row in marks.to_dict("records"):
        found = []
        if not charts.missing(row.get("continuity_break")):
            found.append(f"⟲ history prefilled again ({code(row['continuity_break'])})")
        if not charts.missing(row.get("compaction_tokens_before")):
            found.append(
                f"✂ from a compacted context ({charts.count(row['compaction_tokens_before'])} → "
                f"{charts.count(row.get('compaction_tokens_after'))} tokens)"
            )
        if found:
            notes[row["turn_index"]] = " · ".join(found)
    return notes


def _block(
    filters: Filters, rollout_id: str, block: transcript.Block, mark: str | None, recorded: bool
) -> None:
    """One turn, tool call, judge or reward: its header, then its messages. ``recorded``: whether the rollout
    has any content at all (when it has none, the page says so once, not under every block)."""
    header = f"**{transcript.header(block, code)}**"
    st.markdown(header + (f"  \n{mark}" if mark and block.kind == "turn" else ""))
    for message in block.messages:
        _message(filters, rollout_id, block, message)
    if recorded and not block.messages and block.kind != "reward":
        st.caption(transcript.NO_CONTENT)


def _message(filters: Filters, rollout_id: str, block: transcript.Block, message: dict) -> None:
    role = "judge" if block.kind == "judge" else message.get("role")
    avatar = JUDGE_AVATAR if role == "judge" else AVATARS.get(role, "assistant")
    with st.chat_message("user" if role == "user" else "assistant", avatar=avatar):
        st.caption(_label(block, message))
        if message.get("reasoning"):
            with st.expander(f"Reasoning · {len(message['reasoning']):,} characters"):
                st.text(message["reasoning"])
        if message.get("content"):
            _text(message["content"], as_code=block.kind == "tool" or message.get("role") == "tool")
        calls = transcript.tool_calls(message)
        if calls:
            _text("\n".join(calls), as_code=True)
        if message.get("shown_cut"):
            _whole(filters, rollout_id, block, message)


def _label(block: transcript.Block, message: dict) -> str:
    parts = [transcript.label(block, message, code)]
    if message.get("finish_reason"):
        parts.append(f"finish: {code(message['finish_reason'])}")
    if message.get("tokens") is not None:
        parts.append(f"{charts.count(message['tokens'])} tokens")
    if message.get("truncated"):
        parts.append(f"capped at capture ({charts.count(message.get('content_chars'))} characters in all)")
    return " · ".join(parts)


def _text(text: str, as_code: bool) -> None:
    """A text as text: a tool's output or a call in a code box (scrolling when tall), prose as plain text."""
    tall = text.count("\n") > TALL_LINES
    if as_code or tall:
        st.code(text, language=None, wrap_lines=True, height=420 if tall else "content")
    else:
        st.text(text)


def _whole(filters: Filters, rollout_id: str, block: transcript.Block, message: dict) -> None:
    key = f"whole:{rollout_id}:{block.span_id}:{message['ordinal']}"
    if not st.toggle("Whole text", key=key):
        return
    bounds = calls.window(filters, rollout_id)
    whole = calls.call(
        filters.store,
        transcripts.message,
        filters.run_id,
        rollout_id,
        block.span_id,
        message["ordinal"],
        bounds,
    )
    for part in ("reasoning", "content", "tool_calls"):
        text = whole.get(part)
        if text and len(text) > WHOLE_CHARS:
            st.caption(
                f"{part}: the first {WHOLE_CHARS:,} of {len(text):,} characters (all of it: `rollscope show "
                "--json`)"
            )
            text = text[:WHOLE_CHARS]
        if text:
            st.code(text, language=None, wrap_lines=True, height=420)


# --- its group ------------------------------------------------------------------------------------------------


def side_by_side(attempts: pd.DataFrame, frames: pd.DataFrame) -> None:
    """Attempts of the group next to each other, best reward first; which ones is the reader's choice."""
    ranked = attempts.sort_values("reward", ascending=False, na_position="last")["rollout_id"].tolist()
    default = (
        ranked
        if len(ranked) <= SIDE_BY_SIDE
        else [*ranked[: SIDE_BY_SIDE // 2], *ranked[-SIDE_BY_SIDE // 2 :]]
    )
    chosen = st.multiselect(
        f"Side by side (at most {SIDE_BY_SIDE}; best reward first)",
        ranked,
        default=default,
        max_selections=SIDE_BY_SIDE,
        key="side-by-side",
    )
    rewards = attempts.set_index("rollout_id")["reward"]
    for column, rollout_id in zip(st.columns(max(1, len(chosen))), chosen, strict=False):
        with column:
            st.markdown(f"{code(rollout_id)} · reward **{charts.number(rewards.get(rollout_id))}**")
            for block in transcript.blocks(frames[frames["rollout_id"] == rollout_id]):
                st.caption(transcript.header(block, code))
                for message in block.messages:
                    st.caption(_label(block, message))
                    text = "\n".join(
                        t for t in (message.get("content"), *transcript.tool_calls(message)) if t
                    )
                    if text:
                        st.code(
                            text,
                            language=None,
                            wrap_lines=True,
                            height=200 if text.count("\n") > 8 else "content",
                        )


def diff(attempts: pd.DataFrame, frames: pd.DataFrame) -> None:
    """A unified diff of two attempts' transcripts (default: the best and the worst reward)."""
    ranked = attempts.sort_values("reward", ascending=False, na_position="last")["rollout_id"].tolist()
    if len(ranked) < 2:
        return
    cols = st.columns(2)
    a = cols[0].selectbox("Diff: from", ranked, index=0, key="diff-a")
    b = cols[1].selectbox("to", ranked, index=len(ranked) - 1, key="diff-b")
    found = {r: transcript.blocks(frames[frames["rollout_id"] == r]) for r in (a, b)}
    text = transcript.diff(found[a], found[b], a, b)
    if text:
        st.code(text, language="diff", height=480 if text.count("\n") > 30 else "content")
    else:
        st.caption("The two transcripts read the same.")


# --- its task -------------------------------------------------------------------------------------------------

HISTORY_COLUMNS = {
    "step": charts.count,
    "policy_version": charts.count,
    "rollout_status": None,
    "reward": charts.number,
    "outcome": None,
    "turns": charts.count,
    "decoded_tokens": charts.count,
}


def history(run_id: str, rollout_id: str, attempts: pd.DataFrame | None) -> None:
    """The task's attempts across training, oldest first, each a link to its transcript (None: the rollout
    names no task)."""
    if attempts is None or attempts.empty:
        st.caption("This rollout records no task_id: no other attempts to show.")
        return
    solved = int((attempts["reward"].fillna(0) > 0).sum())
    st.caption(
        f"{len(attempts)} attempts (at most {transcripts.HISTORY_LIMIT}, the newest), {solved} with a positive "
        "reward. What to look for: the step from which the task is solved, and whether it stays solved."
    )
    shown = attempts.assign(
        outcome=[
            "usable" if u else f"lost at {s}: {r}"
            for u, s, r in zip(attempts["usable"], attempts["lost_at"], attempts["lost_reason"], strict=True)
        ],  # noqa: E501
        open=[viewer(run_id, r) for r in attempts["rollout_id"]],
    )
    table = pd.concat([shown[["rollout_id"]], readable(shown, HISTORY_COLUMNS), shown[["open"]]], axis=1)
    table.insert(0, "", ["▶" if r == rollout_id else "" for r in attempts["rollout_id"]])
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        key="task-history",
        column_config={"open": st.column_config.LinkColumn("open", display_text="open")},
    )


def readable(frame: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """The frame's columns as the page shows them: counts with separators, durations with units."""
    shown = frame[list(columns)].copy()
    for column, form in columns.items():
        if form is not None:
            shown[column] = [form(v) for v in shown[column]]
    return shown.rename(columns={"duration_s": "duration", "start_time": "started"})
