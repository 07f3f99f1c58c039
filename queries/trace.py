"""One rollout at a time: finding rollouts, and the spans of one laid out as a waterfall.

The SQL is in ``queries/sql/rollout_trace/``; these functions bind its ``$parameters`` and return frames, so the
Rollouts page shows nothing ``rollscope sql`` could not.
"""

from __future__ import annotations

import pandas as pd

from rollscope.queries import sqlfiles

SEARCH_LIMIT = 500
REUSE_STEPS = 16  # optimizer steps after its first in which a rollout's samples are looked for (window.sql)
# History prefilled again for no recorded reason that is not a break of continuity but the prompt's last partial
# cache block (vLLM caches 16-token blocks): continuity.sql marks unattributed re-prefill from this many tokens.
BREAK_MIN_TOKENS = 64
# Clock skew between the hosts that write a rollout's spans: they start within a minute of it (window.sql).
SKEW_NS = 60_000_000_000


def _query(con, name: str, **params) -> pd.DataFrame:
    """``rollout_trace/<name>.sql``, with the clock skew its time windows allow (the files that name it)."""
    return sqlfiles.run(con, f"rollout_trace/{name}", title="Rollout query failed", skew_ns=SKEW_NS, **params)


def search(
    con,
    run_id: str,
    *,
    environment: str | None = None,
    status: str | None = None,
    text: str | None = None,
    reward: tuple[float, float] | None = None,
    steps: tuple[int, int] | None = None,
    lost_at: str | None = None,
    lost_reason: str | None = None,
    limit: int = SEARCH_LIMIT,
) -> pd.DataFrame:
    """Rollouts of ``run_id`` matching every filter given (``text`` matches rollout or task id; ``lost_at`` and
    ``lost_reason`` the funnel stage it was lost at, "usable" for none, and why), newest first."""
    reward_min, reward_max = reward if reward is not None else (None, None)
    step_lo, step_hi = steps if steps is not None else (None, None)
    return _query(
        con,
        "search",
        run_id=run_id,
        environment=environment,
        status=status,
        text=text or None,
        reward_min=reward_min,
        reward_max=reward_max,
        step_lo=step_lo,
        step_hi=step_hi,
        lost_at=lost_at,
        lost_reason=lost_reason,
        limit=limit,
    )


def window(con, run_id: str, rollout_id: str) -> dict:
    """Where in time the rollout's raw spans can be (``window.sql``): ``lo``/``hi`` for its own,
    ``sample_lo``/``sample_hi`` for its samples and consuming train steps. All None for an unknown rollout,
    which then matches no span."""
    frame = _query(con, "window", run_id=run_id, rollout_id=rollout_id, reuse_steps=REUSE_STEPS)
    if frame.empty:
        return dict.fromkeys(("lo", "hi", "sample_lo", "sample_hi"))
    return {k: _plain(v) for k, v in frame.iloc[0].items()}


def rollout(con, run_id: str, rollout_id: str, bounds: dict | None = None) -> dict | None:
    """The rollout's identity and outcome, and the train step (and policy version) that consumed it.

    ``bounds``: the rollout's ``window``, when the caller has it already (the Rollouts page computes it once
    for this and ``spans``: each lookup of one rollout id reads the run's per-rollout table whole)."""
    bounds = bounds if bounds is not None else window(con, run_id, rollout_id)
    frame = _query(con, "consumer", run_id=run_id, rollout_id=rollout_id, **bounds)
    if frame.empty:
        return None
    return {k: _plain(v) for k, v in frame.iloc[0].items()}


def group(con, run_id: str, rollout_id: str, bounds: dict | None = None) -> pd.DataFrame:
    """The attempts of the rollout's group (itself included): reward, advantage, turns and tokens.

    ``bounds``: the rollout's ``window``, when the caller has it already."""
    bounds = bounds if bounds is not None else window(con, run_id, rollout_id)
    return _query(con, "group", run_id=run_id, rollout_id=rollout_id, lo=bounds["lo"], hi=bounds["hi"])


def spans(con, run_id: str, rollout_id: str, bounds: dict | None = None) -> pd.DataFrame:
    """Every span of the rollout in start order, with ``kind``, ``start_s`` and ``end_s`` from its start.

    Reads the raw spans of the rollout's time window only (``window``, or ``bounds`` when the caller has it):
    segments are ordered by time, not by rollout, so an unbounded lookup would read the whole run."""
    bounds = bounds if bounds is not None else window(con, run_id, rollout_id)
    return _query(con, "spans", run_id=run_id, rollout_id=rollout_id, **bounds)


def continuity(con, run_id: str, rollout_id: str, bounds: dict | None = None) -> pd.DataFrame:
    """The rollout's turns with where prefix continuity broke (``continuity_break``: why its history was
    prefilled again, NULL where none was) and where compaction happened (``compaction_tokens_before`` /
    ``_after``, the training ``sample`` each turn belongs to): ``continuity.sql``, read in the rollout's time
    window (``window``, or ``bounds`` when the caller has it). What a conversation view of the rollout marks."""
    bounds = bounds if bounds is not None else window(con, run_id, rollout_id)
    return _query(
        con,
        "continuity",
        run_id=run_id,
        rollout_id=rollout_id,
        lo=bounds["lo"],
        hi=bounds["hi"],
        min_tokens=BREAK_MIN_TOKENS,
    )


def _plain(value):
    """numpy and pandas scalars as plain Python values; missing ones as None."""
    if value is None or value is pd.NaT or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") and not isinstance(value, pd.Timestamp) else value
