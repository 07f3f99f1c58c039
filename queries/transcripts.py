"""Transcripts beside the accounting: one rollout as a conversation, its group's, one task's attempts, and text
search over a run's messages (docs/transcripts.md).

The SQL is in ``queries/sql/transcripts/``; these functions bind its ``$parameters`` and return frames, so the
Rollouts page and `rollscope show` show nothing ``rollscope sql`` could not. A rollout's messages and spans are
read in its time window (``trace.window``), so opening one reads the row groups of its time, not the run's.
"""

from __future__ import annotations

import pandas as pd

from rollscope.queries import sqlfiles, text_index, text_search, trace
from rollscope.queries.analyses import _filters

SHOWN_CHARS = 2_000  # a text longer than this is shown cut at first (head and tail), whole on demand
SEARCH_LIMIT = 200
HISTORY_LIMIT = 200


def _query(con, name: str, **params) -> pd.DataFrame:
    return sqlfiles.run(con, f"transcripts/{name}", title="Transcript query failed", **params)


def _window(con, run_id: str, rollout_id: str, bounds: dict | None) -> dict:
    return bounds if bounds is not None else trace.window(con, run_id, rollout_id)


def conversation(
    con,
    run_id: str,
    rollout_id: str,
    bounds: dict | None = None,
    max_chars: int | None = SHOWN_CHARS,
) -> pd.DataFrame:
    """The rollout's messages in reading order, each beside its span's accounting (``conversation.sql``): a
    turn's tokens, cached tokens, prefill / decode time and acceptance, a tool call's exit code, a judge's score.
    Texts past ``max_chars`` come cut around a marker (``shown_cut``; None: whole)."""
    bounds = _window(con, run_id, rollout_id, bounds)
    return conversations(con, run_id, [rollout_id], bounds["lo"], bounds["hi"], max_chars)


def conversations(
    con, run_id: str, rollout_ids: list[str], lo: int | None, hi: int | None, max_chars: int | None
) -> pd.DataFrame:
    """``conversation`` of several rollouts read at once in the window ``lo .. hi`` (nanoseconds) that holds
    them all, ordered by rollout."""
    return _query(
        con, "conversation", run_id=run_id, rollout_ids=list(rollout_ids), lo=lo, hi=hi, max_chars=max_chars
    )


def group_conversations(
    con, run_id: str, rollout_id: str, bounds: dict | None = None, max_chars: int | None = SHOWN_CHARS
) -> pd.DataFrame:
    """The conversations of the rollout's group (its attempts, ``trace.group``), read at once in one window
    from the first attempt's start to the last one's end (a minute each side, as ``window.sql``)."""
    attempts = trace.group(con, run_id, rollout_id, _window(con, run_id, rollout_id, bounds))
    if attempts.empty:
        return conversations(con, run_id, [], None, None, max_chars)
    lo, hi = int(attempts["start_ns"].min()) - trace.SKEW_NS, int(attempts["end_ns"].max()) + trace.SKEW_NS
    return conversations(con, run_id, attempts["rollout_id"].tolist(), lo, hi, max_chars)


def message(
    con, run_id: str, rollout_id: str, span_id: int, ordinal: int, bounds: dict | None = None
) -> dict:
    """One message whole (``message.sql``): what a reader expands when the conversation showed it cut. {} when
    there is no such message."""
    bounds = _window(con, run_id, rollout_id, bounds)
    params = {"run_id": run_id, "rollout_id": rollout_id, "span_id": span_id, "ordinal": ordinal}
    return sqlfiles.run(
        con,
        "transcripts/message",
        title="Transcript query failed",
        fetch=sqlfiles.first_row,
        lo=bounds["lo"],
        hi=bounds["hi"],
        **params,
    )


def stage(con, run_id: str, rollout_id: str) -> dict:
    """Where the rollout stands in the funnel (``stage.sql``): the stage it was lost at and why (None: usable),
    its consuming step, decision and staleness. {} for a rollout the funnel does not know yet."""
    return sqlfiles.run(
        con,
        "transcripts/stage",
        title="Transcript query failed",
        fetch=sqlfiles.first_row,
        run_id=run_id,
        rollout_id=rollout_id,
    )


def scores(con, run_id: str, rollout_id: str, bounds: dict | None = None) -> pd.DataFrame:
    """Each reward function's and judge's score for the rollout (``scores.sql``), in start order."""
    bounds = _window(con, run_id, rollout_id, bounds)
    return _query(con, "scores", run_id=run_id, rollout_id=rollout_id, lo=bounds["lo"], hi=bounds["hi"])


def history(con, run_id: str, task_id: str, limit: int = HISTORY_LIMIT) -> pd.DataFrame:
    """The task's attempts across training, oldest first (``history.sql``): step, reward, outcome."""
    return _query(con, "history", run_id=run_id, task_id=task_id, limit=limit)


def search(
    con,
    run_id: str,
    pattern: str | None = None,
    *,
    regex: bool = False,
    text: str | None = None,
    status: str | None = None,
    environment: str | None = None,
    steps: tuple[int, int] | None = None,
    reward: tuple[float | None, float | None] | None = None,
    lost_at: str | None = None,
    lost_reason: str | None = None,
    finish_reason: str | None = None,
    limit: int = SEARCH_LIMIT,
    walk: bool = True,
) -> pd.DataFrame:
    """Rollouts of ``run_id`` with a message matching ``pattern`` (a substring, or with ``regex`` a regular
    expression; either case-insensitive) and every filter given (``text``: in the rollout or task id, as
    ``trace.search``), newest first, one row per rollout with its first hit's snippet (``search.sql``). A bad
    regular expression raises QueryError. A reader's search reads the row groups the trigram sidecars leave,
    newest first, and stops once the newest ``limit`` are known (``text_search``); ``walk=False`` reads every
    message through search.sql, the definition (what tests and benchmarks check the walk against)."""
    reward_min, reward_max = reward if reward is not None else (None, None)
    pattern = pattern or None
    cur = con.cursor()  # what the search registers is this cursor's alone
    params = dict(
        run_id=run_id,
        pattern=pattern,
        regex=bool(regex),
        prefilter=text_index.prefilter(cur, pattern),
        text=text or None,
        status=status,
        **_filters(steps, environment),
        reward_min=reward_min,
        reward_max=reward_max,
        lost_at=lost_at,
        lost_reason=lost_reason,
        finish_reason=finish_reason,
        limit=limit,
    )
    found = text_search.search(cur, params) if walk else None
    return found if found is not None else _query(cur, "search", **params)
