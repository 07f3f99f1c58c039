"""Example rollouts: the transcripts behind a figure. Every funnel loss, every check and every advisor lever
names the rollouts it rests on ("5 of the 72 all-wrong groups"), so a reader goes from the number to what the
agent did (docs/transcripts.md, "Examples").

A ``Selection`` says which rollouts (a kind of ``queries/sql/examples/*.sql`` and its parameters) and how to
name them; ``rollouts`` finds them, a few from distinct groups by default, or the whole selection for the
Rollouts page's list. ``CHECKS`` and ``LEVERS`` hold the selection behind each check and lever.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from rollscope.queries import sqlfiles
from rollscope.queries.analyses import ADVICE_DEFAULTS, _filters
from rollscope.semconv import FUNNEL_RATES

EXAMPLES = 5  # examples a figure links to
# Runs of up to this many rollouts have a figure's examples picked on its own page. A selection reads every
# rollout of the run (0.2-1.5 s a selection at 2.2M rollouts, a 30M-span run): beyond this, a figure links to
# its list, and the Rollouts page picks them when it is opened.
INLINE_ROLLOUTS = 250_000
LIST_LIMIT = 500  # rollouts the Rollouts page lists of one selection
SOURCES = {  # kind -> the SQL file that finds it
    **dict.fromkeys(
        ("lost", "all_wrong", "all_right", "reprefilled", "long", "new_prefill", "tool_wait", "mismatch"),
        "rollouts",
    ),  # noqa: E501
    **dict.fromkeys(("drafter_logprobs", "low_acceptance"), "turns"),
    "clipped": "clipped",
}
ASCENDING = frozenset({"low_acceptance"})  # kinds whose smallest value is the example worth opening first
VALUES = {  # kind -> what its value column is (None: it has none)
    "reprefilled": "history tokens prefilled again",
    "long": "decoded tokens",
    "new_prefill": "new prefill tokens",
    "tool_wait": "seconds in tools",
    "mismatch": "train-inference KL",
    "drafter_logprobs": "turns with the drafter's log-probabilities",
    "low_acceptance": "speculative acceptance",
    "clipped": "messages cut at the token limit",
}


@dataclass(frozen=True)
class Selection:
    """Which rollouts: ``kind`` (a kind of ``SOURCES``) with its parameters, and what they are, in words that
    follow "5 of the 72 …" (``what``: "rollouts lost to all-wrong groups")."""

    kind: str
    what: str
    params: dict = field(default_factory=dict)

    def __hash__(self) -> int:  # a page caches results by its arguments
        return hash((self.kind, self.what, tuple(sorted(self.params.items()))))


def lost(stage: str, reason: str | None = None) -> Selection:
    """The rollouts the funnel lost at ``stage`` (for ``reason``, as funnel_losses names it)."""
    why = f" ({reason})" if reason else ""
    where = FUNNEL_RATES.get(stage, stage).replace("_", " ")
    return Selection("lost", f"rollouts lost at {where}{why}", {"lost_at": stage, "lost_reason": reason})


CHECKS = {  # check name (queries.checks) -> the rollouts it rests on
    "nonzero-signal": lost("nonzero_signal"),
    "staleness-violations": lost("fresh", "stale"),
    "mismatch-kl": Selection("mismatch", "consumed rollouts with a train-inference KL, largest first"),
    "drafter-logprobs": Selection(
        "drafter_logprobs", "rollouts with turns that recorded the drafter's log-probabilities"
    ),  # noqa: E501
    "acceptance-drift": Selection(
        "low_acceptance", "rollouts of the latest policy versions, lowest acceptance first", {"versions": 3}
    ),  # noqa: E501
}
LEVERS = {  # advisor lever (queries.analyses.ADVICE_LEVERS) -> the rollouts its evidence counts
    "task_selection": Selection("all_wrong", "rollouts of all-wrong groups (every attempt failed)"),
    "scoring": lost("scored"),
    "infra": lost("completed"),
    "staleness": lost("fresh", "stale"),
    "drafter_refresh": CHECKS["acceptance-drift"],
    "spec_budget": Selection(
        "long", "long rollouts, most decoded tokens first", {"min_tokens": ADVICE_DEFAULTS["long_tokens"]}
    ),  # noqa: E501
    "prefix_reuse": Selection("reprefilled", "rollouts that prefilled history again, most first"),
    "disaggregation": Selection("new_prefill", "rollouts by new prefill tokens, most first"),
    "tool_waits": Selection("tool_wait", "rollouts by time in tools, most first"),
}


def rollouts(
    con,
    run_id: str,
    selection: Selection,
    *,
    steps: tuple[int, int] | None = None,
    environment: str | None = None,
    limit: int = EXAMPLES,
    **params,
) -> pd.DataFrame:
    """Up to ``limit`` rollouts of the selection (one per group first, the largest ``value`` first, else the
    newest), with ``total`` (the selection's rollouts) and ``groups`` on every row; ``params`` add to the
    selection's (``min_tokens`` for long rollouts)."""
    return sqlfiles.run(
        con,
        f"examples/{SOURCES[selection.kind]}",
        title="Example query failed",
        over=("examples/ranked", None),  # its rows, picked (ranked.sql reads them as ``analysis``)
        run_id=run_id,
        kind=selection.kind,
        ascending=selection.kind in ASCENDING,
        limit=limit,
        finish_reason="length",
        **_filters(steps, environment),
        **{**selection.params, **params},
    )


def inline(con, run_id: str) -> bool:
    """Whether the run is small enough (``INLINE_ROLLOUTS``) for a page to pick its figures' examples."""
    size = sqlfiles.run(
        con, "examples/size", title="Example query failed", fetch=sqlfiles.first_row, run_id=run_id
    )
    return size["rollouts"] <= INLINE_ROLLOUTS


def count_line(found: pd.DataFrame, selection: Selection) -> str:
    """``5 of the 72 rollouts lost at nonzero signal (all-equal group), from 18 groups``: what the examples
    are, for their link."""
    if found.empty:
        return f"no {selection.what}"
    total, groups = int(found["total"].iloc[0]), int(found["groups"].iloc[0])
    spread = f", from {groups:,} groups" if groups not in (total, len(found)) else ""
    return f"{len(found)} of the {total:,} {selection.what}{spread}"


def named(key: str) -> Selection | None:
    """The selection a link names: ``check:<name>`` (``CHECKS``) or ``lever:<name>`` (``LEVERS``); None for
    any other key."""
    kind, _, name = key.partition(":")
    return {"check": CHECKS, "lever": LEVERS}.get(kind, {}).get(name)
