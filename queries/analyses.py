"""Every analysis of docs/metrics.md as a function of a DuckDB connection, a run id and optional filters.

The SQL lives in ``queries/sql/analyses/<name>.sql`` (one file per analysis) on top of the views; the
functions here only bind parameters and shape results, so every figure can be reproduced with
``rollscope sql``. Shared building blocks (``rollout_steps(run)``, ``rollout_stages(run)``) are DuckDB table
macros in ``queries/sql/analyses/macros``, created on a connection the first time an analysis needs them.

Filters: ``steps=(lo, hi)`` keeps rollouts consumed by train steps lo..hi (inclusive; rollouts not consumed
yet drop out), and train steps, samples in that range; ``environment=`` keeps one environment's rollouts.

Every function also accepts a ``Memo`` in place of the connection: results are then kept, and an analysis
asked for again with the same parameters is not run again (a report, the checks and the trends share them).
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from rollscope import formats
from rollscope.errors import QueryError, UnknownRunError
from rollscope.queries import sqlfiles

# DuckDB imports pandas when an analysis answers with a frame; the advisor's answers are dicts, read without it.
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

SUCCESS_THRESHOLD = 0.5  # a scored rollout succeeded when its reward is at least this (docs/semconv.md)
ROLLING_STEPS = 10  # the window of every per-step rolling mean, in train steps (pages' legends name it)
# Queries ``together`` runs at once: one per core, at least two (DuckDB plans on the calling thread while its
# own threads execute another query), at most four (each query in flight holds its own buffers: two at once
# raised `rollscope advise`'s peak memory at 10M spans from ~250 MB to ~300 MB).
QUERY_THREADS = min(4, max(2, os.cpu_count() or 2))
T = TypeVar("T")
_MACRO = re.compile(r"CREATE OR REPLACE MACRO (\w+)")


# --- running analysis SQL ---------------------------------------------------------------------------------


def install_macros(con) -> None:
    """Create the shared table macros on ``con``'s database (visible to its cursors too).

    Two threads may race to create them on first use; the loser's conflict is harmless, the macro exists.
    """
    for name in sqlfiles.folder("analyses/macros"):
        try:
            sqlfiles.execute(con, name)
        except duckdb.TransactionException:
            pass


@cache
def _macros() -> tuple[str, ...]:
    """The names install_macros creates: an analysis failing on one of them runs again after it."""
    return tuple(_MACRO.findall("\n".join(map(sqlfiles.load, sqlfiles.folder("analyses/macros")))))


def query(con, name: str, run_id: str, rolling: tuple[str, ...] = (), over: str | None = None, **params):
    """Run ``analyses/<name>.sql`` (``sqlfiles.run``: each statement gets the ``$parameters`` it names).

    ``over``: instead, the figures ``analyses/<over>.sql`` computes over this analysis's rows (its query reads
    them as ``analysis``), in the same statement. ``rolling`` (columns of a per-step result): each also gets
    ``<column>_rolling_mean`` over the last ``ROLLING_STEPS`` steps (or ``rolling_window``), by
    ``analyses/rolling_mean.sql`` the same way.
    """
    values = {"run_id": run_id, **params}
    outer = None
    if over:
        outer = (f"analyses/{over}", None)
    elif rolling:
        outer = _rolling_over(params.get("by"))
        values = {"rolling_columns": list(rolling), "rolling_window": ROLLING_STEPS, **values}
    return _answer(con, name, values, outer)


def _answer(con, name: str, values: dict, outer: tuple[str, str] | None = None, fetch=sqlfiles.frame):
    """``_run``'s answer; on a Memo computed once per analysis, outer query, way of reading it (``fetch``: a row
    is not a frame) and value of each parameter its SQL uses."""
    if not isinstance(con, Memo):
        return _run(con, name, values, outer, fetch)
    used = sqlfiles.parameters(f"analyses/{name}", outer)
    key = (name, outer, fetch, *sorted((k, _hashable(values.get(k))) for k in used))
    return con.result(key, lambda cursor: _run(cursor, name, values, outer, fetch))


def _rolling_over(by: str | None) -> tuple[str, str]:
    """A per-step result's rows form one series per environment when split by step and environment."""
    return ("analyses/rolling_mean", "environment" if by == "step_environment" else "NULL")


def _hashable(value):
    if isinstance(value, dict):  # a row passed as a STRUCT (the advisor's $base)
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


def query_row(con, name: str, run_id: str, **params) -> dict[str, Any]:
    """The first row of ``analyses/<name>.sql`` as plain Python values ({} without rows), the same values as
    ``record(query(...))`` but read without pandas (``sqlfiles.first_row``): a command that only needs such
    rows, like `rollscope advise`, never imports it."""
    return _answer(con, name, {"run_id": run_id, **params}, fetch=sqlfiles.first_row)


def query_rows(con, name: str, run_id: str, **params) -> list[dict[str, Any]]:
    """Every row of ``analyses/<name>.sql`` as ``query_row`` reads its first (``sqlfiles.all_rows``)."""
    rows = _answer(con, name, {"run_id": run_id, **params}, fetch=sqlfiles.all_rows)
    return [dict(row) for row in rows]  # a Memo keeps the list; each caller gets rows of its own


def _run(con, name: str, values: dict, over: tuple[str, str] | None = None, fetch=sqlfiles.frame):
    title = f"Analysis {name} failed"
    try:
        return sqlfiles.run(con, f"analyses/{name}", title=title, over=over, fetch=fetch, **values)
    except QueryError as e:
        missing = isinstance(e.__cause__, duckdb.CatalogException) and any(
            m in str(e.__cause__) for m in _macros()
        )
        if not missing:
            raise
        install_macros(con)
        return sqlfiles.run(con, f"analyses/{name}", title=title, over=over, fetch=fetch, **values)


def require_run(con, run_id: str) -> str:
    """Raise UnknownRunError unless the store holds spans of ``run_id``: its derived state says so, or else its
    raw segments do (a run not derived yet)."""
    if not any(query_row(con, name, run_id).get("run_exists") for name in ("run_exists", "run_spans")):
        raise UnknownRunError("Unknown run", f"no run {run_id!r} in this store (`rollscope runs` lists them)")
    return run_id


class Memo:
    """A connection that keeps what the analyses computed on it, so that each runs once per parameters.

    A report, the checks and the overview's trends read several of the same analyses (the funnel by step,
    the log-prob lint, the staleness by step, the compute terms); handed one Memo they compute each once.
    Keep one only while the data it reads stays the same: the dashboard keeps one per run and set of
    segments. ``cursor`` gives the connection each analysis runs on; a second thread asking for an analysis
    being computed waits for it rather than computing it too.
    """

    MAX_RESULTS = 1024  # the oldest are forgotten beyond this (a slider dragged across many step ranges)

    def __init__(self, cursor: Callable[[], duckdb.DuckDBPyConnection]):
        self._cursor = cursor
        self._lock = threading.Lock()
        self._slots: dict[tuple, _Slot] = {}

    def result(self, key: tuple, compute: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``compute``'s answer (a frame, or a row's dict) for ``key``, computed at most once; each caller gets
        its own copy."""
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
            while len(self._slots) > self.MAX_RESULTS:
                del self._slots[next(iter(self._slots))]
        with slot.lock:
            if slot.frame is None:  # on a cursor of its own: analyses asked for ``together`` run at once
                slot.frame = compute(self._cursor().cursor())
            kept = slot.frame  # an Arrow table cannot change: only frames and dicts are copied
            return kept.copy() if hasattr(kept, "copy") else kept

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection for SQL whose result is not kept (``report.changes``, over figures already computed)."""
        return self._cursor()

    def kept(self) -> int:
        """How many results are kept (one per analysis and parameters)."""
        with self._lock:
            return len(self._slots)

    def computed(self) -> set[str]:
        """The names of the analyses kept (any parameters)."""
        with self._lock:
            return {key[0] for key in self._slots}

    def kept_of(self, name: str) -> int:
        """How many results of analysis ``name`` are kept (one per parameters)."""
        with self._lock:
            return sum(1 for key in self._slots if key[0] == name)


class _Slot:
    def __init__(self):
        self.lock = threading.Lock()
        self.frame: pd.DataFrame | dict | pa.Table | None = None


def together(calls: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Each of ``calls`` (independent figures read from one Memo) computed at once on a few threads; the answers
    in ``calls``' order, and the first error in that order raised as if they had run one after the other.

    DuckDB parses, binds and plans a query on the calling thread, most of the time of the small queries over
    per-step tables that a report or the advisor runs a dozen of, and releases the GIL meanwhile: together they
    take about the time of the longest few, not the sum (``rollscope advise`` at 10M spans, issue 15). The
    Memo still computes an analysis two calls share once."""
    workers = min(len(calls), QUERY_THREADS)
    if workers <= 1:
        return {name: call() for name, call in calls.items()}
    with ThreadPoolExecutor(workers, thread_name_prefix="rollscope-query") as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}


def memo(con) -> Memo:
    """``con`` itself when it is already a Memo, else a Memo running every analysis on ``con``."""
    return con if isinstance(con, Memo) else Memo(lambda: con)


def _filters(steps: tuple[int, int] | None, environment: str | None) -> dict:
    lo, hi = steps if steps is not None else (None, None)
    return {"step_lo": lo, "step_hi": hi, "environment": environment}


def _by(by: str | None, allowed: tuple[str, ...]) -> str | None:
    if by is not None and by not in allowed:
        raise ValueError(f"by must be one of {', '.join(allowed)} (or None), not {by!r}")
    return by


def _keep_by(frame: pd.DataFrame, by: str | None, keys: tuple[str, ...]) -> pd.DataFrame:
    """Analyses group by one of several key columns; keep only the one asked for."""
    return frame.drop(columns=[k for k in keys if k != by])


def record(frame: pd.DataFrame) -> dict:
    """A one-row frame as a dict of plain Python values (NaN and NA become None)."""
    if frame.empty:
        return {}
    return {column: plain(frame[column].iloc[0]) for column in frame.columns}


def plain(value):
    pandas = sys.modules.get(
        "pandas"
    )  # its NA exists only once pandas is imported (rollscope/formats.py too)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if pandas is not None and value is pandas.NA:
        return None
    return value.item() if hasattr(value, "item") else value


# --- filters ----------------------------------------------------------------------------------------------


def steps(con, run_id: str) -> tuple[int, int] | None:
    """The first and last train step of the run (None when the trainer has recorded none)."""
    row = record(query(con, "step_range", require_run(con, run_id)))
    return None if row.get("first_step") is None else (row["first_step"], row["last_step"])


def environments(con, run_id: str) -> list[str]:
    """The environments the run's rollouts name, sorted."""
    return query(con, "environments", require_run(con, run_id))["environment"].tolist()


# --- usable-experience funnel -----------------------------------------------------------------------------

_FUNNEL_KEYS = ("step", "environment", "task")


def funnel(con, run_id: str, by: str | None = None, steps=None, environment=None, rolling=()) -> pd.DataFrame:
    """Rollouts dispatched → completed → scored → nonzero_signal → fresh = usable, with each stage's rate."""
    by = _by(by, _FUNNEL_KEYS)
    frame = query(con, "funnel", require_run(con, run_id), rolling, by=by, **_filters(steps, environment))
    return _keep_by(frame, by, _FUNNEL_KEYS)


def funnel_losses(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Per stage, how many rollouts were lost there and why."""
    return query(con, "funnel_losses", require_run(con, run_id), **_filters(steps, environment))


def what_if(dispatched: int, rates: dict, new_rates: dict) -> dict:
    """Usable experience under changed stage rates, and the decode-throughput increase worth the same.

    ``rates`` holds the current rate of each stage (completion, scoring, nonzero_signal, freshness);
    ``new_rates`` the ones that change. usable′ / usable − 1 is the throughput gain (docs/metrics.md).
    """
    merged = {**rates, **new_rates}
    if any(rate is None for rate in merged.values()):  # a stage with nothing in it yet
        return {"usable": None, "new_usable": None, "throughput_gain": None}
    usable = dispatched * math.prod(rates.values())
    new_usable = dispatched * math.prod(merged.values())
    gain = new_usable / usable - 1 if usable else None
    return {"usable": usable, "new_usable": new_usable, "throughput_gain": gain}


# --- compute ----------------------------------------------------------------------------------------------


def compute_terms(con, run_id: str, by: str | None = None, steps=None, environment=None) -> pd.DataFrame:
    """FLOPs and device-seconds of rollout, train, teacher, judge and env (env: CPU seconds, no FLOPs)."""
    by = _by(by, ("step",))
    frame = query(con, "compute_terms", require_run(con, run_id), by=by, **_filters(steps, environment))
    return _keep_by(frame, by, ("step",))


def token_work(con, run_id: str, steps=None, environment=None) -> dict:
    """Per usable generated token: times generated, re-prefilled, trained, teacher-scored; wasted share."""
    return record(query(con, "token_work", require_run(con, run_id), **_filters(steps, environment)))


# --- prefill : decode -------------------------------------------------------------------------------------

_PREFILL_KEYS = ("environment", "turn_index", "step")
# Why history was prefilled again, but compaction (the compaction lever's): the prefix-continuity lever's parts.
CONTINUITY_REASONS = ("retokenized", "evicted", "server_changed", "unattributed")

# When prefill-decode disaggregation pays (see docs/report.md): a large imbalance, stable across steps, at
# turn latencies long enough to limit rollout throughput, in multi-turn work on a model big enough that
# moving its KV cache costs less than the stalls it removes.
DISAGGREGATION = {
    "min_ratio": 4.0,
    "max_step_cv": 0.25,
    "min_steps": 3,
    "min_turn_latency_s": 1.0,
    "min_turns_per_rollout": 2.0,
    "min_model_parameters": 7e9,
}


def prefill_decode(
    con, run_id: str, by: str | None = None, steps=None, environment=None, rolling=()
) -> pd.DataFrame:
    """New / cached prefill and decode tokens, their ratio, cache hit rate, re-prefill waste, seconds."""
    by = _by(by, _PREFILL_KEYS)
    frame = query(
        con, "prefill_decode", require_run(con, run_id), rolling, by=by, **_filters(steps, environment)
    )
    return _keep_by(frame, by, _PREFILL_KEYS)


def prefill_split(con, run_id: str, by: str | None = None, steps=None, environment=None) -> pd.DataFrame:
    """Prompt tokens split by what would spare their prefill: cached, new, history prefilled again by reason,
    a group's task prompt prefilled again, removed by compaction; compaction's extra samples; each part's
    device-seconds and compaction's net effect (docs/metrics.md, "Repeated prefill by remedy")."""
    by = _by(by, _PREFILL_KEYS)
    con = memo(con)  # the advisor's starting point once for every grain asked (a page asks three)
    base = advice_base(con, require_run(con, run_id), steps)
    frame = query(con, "prefill_split", run_id, by=by, base=base, **_filters(steps, environment))
    return _keep_by(frame, by, _PREFILL_KEYS)


def disaggregation(con, run_id: str, steps=None, environment=None) -> dict:
    """Whether prefill-decode disaggregation would pay, with one reason per criterion and the figures."""
    figures = record(query(con, "disaggregation", require_run(con, run_id), **_filters(steps, environment)))
    checks = _disaggregation_checks(figures, DISAGGREGATION)
    reasons = [("yes: " if ok else "no: ") + text for ok, text in checks]
    return {"verdict": bool(checks) and all(ok for ok, _ in checks), "reasons": reasons, **figures}


def _disaggregation_checks(f: dict, t: dict) -> list[tuple[bool, str]]:
    if f.get("prefill_decode_ratio") is None:
        return [(False, "no turns with decode tokens recorded")]
    params = f.get("model_parameters")
    checks = [
        _at_least(
            f["prefill_decode_ratio"],
            t["min_ratio"],
            "new-prefill : decode is {v:.2f} : 1 (large from {t:g} : 1)",
        ),
        _stable(f.get("steps") or 0, f.get("step_ratio_cv"), t),
        _at_least(
            f.get("turn_latency_p50_s"),
            t["min_turn_latency_s"],
            "median turn latency is {v:.1f} s (limits throughput from {t:g} s)",
        ),
        _at_least(
            f.get("turns_per_rollout"),
            t["min_turns_per_rollout"],
            "{v:.1f} turns per rollout (multi-turn from {t:g})",
        ),
    ]
    if params is not None:  # unknown size: no verdict on it either way
        checks.append(
            _at_least(
                params / 1e9,
                t["min_model_parameters"] / 1e9,
                "the model has {v:.1f}B parameters (KV transfer pays from {t:g}B)",
            )
        )
    return checks


def _at_least(value: float | None, limit: float, text: str) -> tuple[bool, str]:
    if value is None:
        return False, text.split(" is ")[0].split(" (")[0] + " not recorded"
    return value >= limit, text.format(v=value, t=limit)


def _stable(n_steps: int, cv: float | None, t: dict) -> tuple[bool, str]:
    if n_steps < t["min_steps"] or cv is None:
        return False, f"{n_steps} consumed steps: too few to call the ratio stable (needs {t['min_steps']})"
    return cv <= t["max_step_cv"], (
        f"the ratio varies by {100 * cv:.1f} % across {n_steps} steps (stable up to {100 * t['max_step_cv']:.1f} %)"
    )


# --- speculative decoding ---------------------------------------------------------------------------------

_SPEC_KEYS = (
    "policy_version",
    "drafter_version",
    "versions_since_refresh",
    "environment",
    "length_bucket",
    "step",
)


def spec_decode(
    con, run_id: str, by: str | None = None, steps=None, environment=None, rolling=()
) -> pd.DataFrame:
    """Drafted / accepted tokens, verify steps, acceptance rate, mean accepted length, expected speedup."""
    by = _by(by, _SPEC_KEYS)
    frame = query(
        con, "spec_decode", require_run(con, run_id), rolling, by=by, **_filters(steps, environment)
    )
    return _keep_by(frame, by, _SPEC_KEYS)


def spec_drift(
    con, run_id: str, steps=None, environment=None, *, baseline_versions: int = 2, drop_points: float = 10.0
) -> pd.DataFrame:
    """Per drafter version: acceptance over its first policy versions vs its latest, and the drop in points."""
    return query(
        con,
        "spec_drift",
        require_run(con, run_id),
        baseline_versions=baseline_versions,
        drop_points=drop_points,
        **_filters(steps, environment),
    )


def logprob_lint(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Turns whose training log-probabilities came from the drafter, by step / policy version / environment."""
    return query(con, "logprob_lint", require_run(con, run_id), **_filters(steps, environment))


def logprob_lint_summary(con, run_id: str, steps=None, environment=None) -> dict:
    """The log-prob lint's total: turns that recorded the drafter's log-probabilities, and the steps and policy
    versions they span."""
    return record(
        query(con, "logprob_lint_summary", require_run(con, run_id), **_filters(steps, environment))
    )


# --- staleness and throughput -----------------------------------------------------------------------------


def staleness(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Consumed samples per staleness (policy versions behind), within the bound or not, violations."""
    return query(con, "staleness", require_run(con, run_id), **_filters(steps, environment))


def staleness_summary(con, run_id: str, steps=None, environment=None) -> dict:
    """Over consumed samples: mean and max staleness, the share within the bound, the samples beyond it, and
    of those how many the trainer used anyway (the violations proper); the run's declared bound even before
    any sample is consumed. ``freshness_rate`` and ``violations`` are the older names of
    ``within_bound_share`` and ``beyond_bound`` (docs/report.md)."""
    return record(query(con, "staleness_summary", require_run(con, run_id), **_filters(steps, environment)))


def staleness_windows(con, run_id: str, window: int) -> dict:
    """The run's worst ``window`` consecutive consuming steps by share of samples beyond the bound (first and
    last step, the share), its samples used beyond the bound and its bound; {} before any is consumed."""
    return record(query(con, "staleness_windows", require_run(con, run_id), window=window))


def nonzero_signal_recent(con, run_id: str, window: int) -> dict:
    """Scored, nonzero-signal and scored-in-groups rollouts and the nonzero-signal rate over the run's latest
    ``window`` consuming steps (``steps`` of them; 0: over every rollout, none consumed yet)."""
    return record(query(con, "nonzero_signal_recent", require_run(con, run_id), window=window))


def staleness_bound(con, run_id: str) -> int | None:
    """The run's rl.staleness.bound (the largest any process declared), or None."""
    return plain(query(con, "staleness_bound", require_run(con, run_id)).iat[0, 0])


def trainer(con, run_id: str, steps=None) -> dict:
    """Trainer idle fraction (Σ waiting for data / Σ step seconds) and the number of train steps."""
    return record(query(con, "trainer", require_run(con, run_id), **_filters(steps, None)))


def throughput(con, run_id: str, steps=None, environment=None) -> dict:
    """Trainer idle fraction, decoded tokens per second, rollout-length tail, tool wait share, lost spans."""
    figures = record(query(con, "throughput", require_run(con, run_id), **_filters(steps, environment)))
    return {**trainer(con, run_id, steps), **figures}


def lost_spans(con, run_id: str) -> dict:
    """Spans the run's exporters dropped or failed to write (what throughput reports, without its scans)."""
    return record(query(con, "lost_spans", require_run(con, run_id)))


def trainer_steps(con, run_id: str, steps=None, rolling=()) -> pd.DataFrame:
    """Per train step: seconds, seconds waiting for data, idle fraction, samples and tokens."""
    return query(con, "trainer_by_step", require_run(con, run_id), rolling, **_filters(steps, None))


# --- per-step series --------------------------------------------------------------------------------------


def staleness_by_step(con, run_id: str, steps=None, environment=None, rolling=()) -> pd.DataFrame:
    """Per consuming step: samples, mean and max staleness, the share within the bound, the samples beyond
    it and those used anyway (named as in staleness_summary)."""
    return query(con, "staleness_by_step", require_run(con, run_id), rolling, **_filters(steps, environment))


def staleness_timing(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Per consuming step: seconds and policy versions of staleness accrued in flight (generating) and queued
    (finished, waiting for the trainer)."""
    return query(con, "staleness_timing", require_run(con, run_id), **_filters(steps, environment))


def staleness_timing_summary(con, run_id: str, steps=None, environment=None) -> dict:
    """``staleness_timing`` over the whole selection: its samples, and each split figure's mean over them
    (``analyses/staleness_timing_summary.sql``)."""
    filters = _filters(steps, environment)
    return record(
        query(con, "staleness_timing", require_run(con, run_id), over="staleness_timing_summary", **filters)
    )


def stale_bias(
    con, run_id: str, steps=None, environment=None, success_threshold=SUCCESS_THRESHOLD
) -> pd.DataFrame:
    """Rollouts with a signal kept (usable) against dropped as stale: count, mean decoded tokens, duration,
    reward and success rate; what dropping stale samples biases training toward."""
    filters = _filters(steps, environment)
    return query(con, "stale_bias", require_run(con, run_id), success_threshold=success_threshold, **filters)


def generations_by_step(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Per consuming step: rollouts, mean decoded tokens per rollout, share clipped at the length limit."""
    return query(con, "generations_by_step", require_run(con, run_id), **_filters(steps, environment))


def rewards_by_step(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Per consuming step and reward function: rollouts scored and the mean score."""
    return query(con, "rewards_by_step", require_run(con, run_id), **_filters(steps, environment))


# --- is it learning ---------------------------------------------------------------------------------------

_LEARNING_KEYS = ("step", "environment", "step_environment")


def learning(
    con,
    run_id: str,
    by: str | None = None,
    steps=None,
    environment=None,
    success_threshold=SUCCESS_THRESHOLD,
    rolling=(),
    percentiles: bool = True,
) -> pd.DataFrame:
    """Scored rollouts, mean reward, its p10 / p50 / p90 and the success rate, for the run or per consuming
    step, environment or both (``by="step_environment"``; rolling means then per environment).
    ``percentiles=False``: the three percentiles NULL, for a caller that shows none of them (they are most of
    the query's time: per step and environment at 30M spans, 1.3 s → 0.3 s)."""
    by = _by(by, _LEARNING_KEYS)
    filters = _filters(steps, environment)
    frame = query(
        con,
        "learning",
        require_run(con, run_id),
        rolling,
        by=by,
        success_threshold=success_threshold,
        percentiles=percentiles,
        **filters,
    )
    keep = {"step": ("step",), "environment": ("environment",), "step_environment": ("step", "environment")}
    return frame.drop(columns=[k for k in ("step", "environment") if k not in keep.get(by, ())])


def task_solve_rates(
    con, run_id: str, steps=None, environment=None, success_threshold=SUCCESS_THRESHOLD
) -> pd.DataFrame:
    """Per task: scored attempts, successes, solve rate overall and over its first / last half of attempts,
    and whether it was always solved, never solved or mixed (curriculum candidates)."""
    filters = _filters(steps, environment)
    return query(
        con, "task_solve_rates", require_run(con, run_id), success_threshold=success_threshold, **filters
    )


def task_solve_summary(
    con, run_id: str, steps=None, environment=None, success_threshold=SUCCESS_THRESHOLD
) -> dict:
    """How many tasks ``task_solve_rates`` lists, and how many were always solved, never solved or mixed
    (``analyses/task_solve_summary.sql``)."""
    filters = {"success_threshold": success_threshold, **_filters(steps, environment)}
    return record(query(con, "task_solve_summary", require_run(con, run_id), **filters))


_ZERO_SIGNAL_KEYS = ("step", "environment", "task")
ZERO_SIGNAL_KINDS = ("all_wrong", "all_right", "other_equal", "group_too_small")


def zero_signal(con, run_id: str, by: str | None = None, steps=None, environment=None) -> pd.DataFrame:
    """Rollouts lost at the nonzero-signal stage and their groups, split into all-wrong, all-right,
    other-equal and too-small groups; for the run or per consuming step, environment or task."""
    by = _by(by, _ZERO_SIGNAL_KEYS)
    frame = query(con, "zero_signal", require_run(con, run_id), by=by, **_filters(steps, environment))
    return _keep_by(frame, by, _ZERO_SIGNAL_KEYS)


def zero_signal_summary(con, run_id: str, steps=None, environment=None) -> dict:
    """The run's zero-signal split as ``{kind: {"groups": n, "rollouts": n}}`` (zeros when none was lost)."""
    row = record(zero_signal(con, run_id, None, steps, environment))
    return {
        kind: {"groups": row.get(f"{kind}_groups") or 0, "rollouts": row.get(f"{kind}_rollouts") or 0}
        for kind in ZERO_SIGNAL_KINDS
    }


def mismatch(
    con, run_id: str, by: str | None = None, steps=None, environment=None, rolling=()
) -> pd.DataFrame:
    """Train-inference mismatch over the samples that recorded it: mean and max KL, log-prob differences,
    importance ratio; for the run or per consuming step."""
    by = _by(by, ("step",))
    frame = query(con, "mismatch", require_run(con, run_id), rolling, by=by, **_filters(steps, environment))
    return _keep_by(frame, by, ("step",))


def mismatch_steps(con, run_id: str, steps=None, environment=None, limit: float | None = None) -> dict:
    """Over the consuming steps that recorded a mismatch: how many, the worst and its mean KL
    (``worst_step_mismatch_kl``), and the steps above ``limit`` (``analyses/mismatch_steps.sql``)."""
    filters = {"by": "step", "limit": limit, **_filters(steps, environment)}
    return record(query(con, "mismatch", require_run(con, run_id), over="mismatch_steps", **filters))


def transcript_flags(con, run_id: str, by: str | None = None, steps=None, environment=None) -> pd.DataFrame:
    """Of the consumed rollouts with transcripts, those cut at the token limit, without a readable answer,
    looping, with a failed tool call (and the failed calls): for the run or per consuming step."""
    by = _by(by, ("step",))
    frame = query(con, "transcript_flags", require_run(con, run_id), by=by, **_filters(steps, environment))
    return _keep_by(frame, by, ("step",))


# metric -> (by-step analysis, its column); each analysis takes (con, run, steps, environment, rolling)
def _funnel_by_step(con, run, s, e, r):
    return funnel(con, run, "step", s, e, r)


def _spec_by_step(con, run, s, e, r):
    return spec_decode(con, run, "step", s, e, r)


def _prefill_by_step(con, run, s, e, r):
    return prefill_decode(con, run, "step", s, e, r)


def _trainer_by_step(con, run, s, e, r):
    return trainer_steps(con, run, s, r)


def _learning_by_step(con, run, s, e, r):
    return learning(con, run, "step", s, e, rolling=r, percentiles=False)


def _mismatch_by_step(con, run, s, e, r):
    return mismatch(con, run, "step", s, e, r)


TRENDS = {
    "usable": (_funnel_by_step, "usable"),
    "nonzero_signal_rate": (_funnel_by_step, "nonzero_signal_rate"),
    "acceptance_rate": (_spec_by_step, "acceptance_rate"),
    "prefill_decode_ratio": (_prefill_by_step, "prefill_decode_ratio"),
    "trainer_idle_fraction": (_trainer_by_step, "trainer_idle_fraction"),
    "staleness_mean": (staleness_by_step, "mean_staleness"),
    "reward_mean": (_learning_by_step, "reward_mean"),
    "success_rate": (_learning_by_step, "success_rate"),
    "train_loss": (_trainer_by_step, "train_loss"),
    "mismatch_kl": (_mismatch_by_step, "mismatch_kl_mean"),
}


def trend(con, run_id: str, metric: str, steps=None, environment=None, rolling: bool = False) -> pd.DataFrame:
    """One figure per consuming step (columns step, <metric>), for the overview's sparklines; with
    ``rolling`` also ``rolling_mean``, the mean of the last ``ROLLING_STEPS`` steps' figures (fewer at the
    start), from the same query. The rolling means of every trend of the same analysis are asked for at once,
    so that on a Memo the trends of one analysis (usable and nonzero-signal: the funnel by step) run it once."""
    if metric not in TRENDS:
        raise ValueError(f"metric must be one of {', '.join(TRENDS)}, not {metric!r}")
    analysis, column = TRENDS[metric]
    shared = tuple(c for a, c in TRENDS.values() if a is analysis)
    frame = analysis(con, run_id, steps, environment, shared if rolling else ())
    names = {column: metric, f"{column}_rolling_mean": "rolling_mean"}
    kept = frame.loc[frame["step"].notna(), [c for c in ("step", *names) if c in frame]]
    return kept.rename(columns=names).reset_index(drop=True)


# --- is training going wrong: the detectors (docs/metrics.md, "Detectors") ---------------------------------
# Each rule's SQL is analyses/detector_<rule>.sql: one row per judged train step (and environment or component
# where it judges them apart) with the figure compared (value), what it was computed from (level, reference) and
# whether it fired. Every detector reads the whole run: its windows run over steps, so a step range would cut them.

DETECTORS = (
    "entropy-collapse",
    "kl-acceleration",
    "length-drift",
    "length-limit",
    "reward-dominance",
    "reward-divergence",
    "group-collapse",
    "mismatch-rising",
)


def detector(con, run_id: str, rule: str, threshold: float, window: int, **options) -> pd.DataFrame:
    """One detector's rows (``options``: a rule's further parameters, e.g. kl-acceleration's ``growth``)."""
    return query(con, _detector_sql(rule), **_detector_values(con, run_id, threshold, window, options))


def detector_summary(con, run_id: str, rule: str, threshold: float, window: int, **options) -> dict:
    """The detector's verdict: steps judged and fired at, whether it fires at the latest judged step (``firing``),
    the first and latest step it fired at, that latest step's figures and the first fired row's
    (``analyses/detector_summary.sql``)."""
    values = _detector_values(con, run_id, threshold, window, options)
    return record(_over_rows(con, "detector_summary", rule, values))


EPISODE_COLUMNS = ("first_step", "last_step", "steps", "environment", "part")  # detector_episodes.sql's


def detector_episodes(con, run_id: str, rule: str, threshold: float, window: int, **options) -> pd.DataFrame:
    """The stretches of consecutive steps the detector fired at: first and last step, steps, and the environment
    and part that fired (``analyses/detector_episodes.sql``)."""
    import pyarrow.compute as pc  # the rows are an Arrow table: pyarrow is loaded

    values = _detector_values(con, run_id, threshold, window, options)
    if not pc.any(_detector_rows(con, rule, values).column("fired")).as_py():
        import pandas  # as DuckDB's frames do, imported where a frame is made

        return pandas.DataFrame({c: pandas.Series(dtype=object) for c in EPISODE_COLUMNS})
    return _over_rows(con, "detector_episodes", rule, values)


def _detector_values(con, run_id: str, threshold: float, window: int, options: dict) -> dict:
    """The parameters of a detector's SQL, its run known to the store."""
    return {"run_id": require_run(con, run_id), **_detector_params(threshold, window, options)}


def _detector_rows(con, rule: str, values: dict):
    """The detector's rows as an Arrow table: on a Memo computed once for its verdict and its stretches both (a
    detector's rows cost up to 0.35 s at 30M spans, its verdict and stretches over them a few milliseconds)."""
    return _answer(con, _detector_sql(rule), values, fetch=sqlfiles.arrow_table)


def _over_rows(con, over: str, rule: str, values: dict):
    """``analyses/<over>.sql`` over the detector's rows (read as ``analysis``), on a cursor of its own; on a Memo
    kept like an analysis's result."""
    rows = _detector_rows(con, rule, values)

    def compute(cursor):
        cursor.register("analysis", rows)
        return _run(cursor, over, {})

    if isinstance(con, Memo):
        return con.result((over, _detector_sql(rule), *sorted(values.items())), compute)
    cursor = con.cursor()
    try:
        return compute(cursor)
    finally:
        cursor.close()


def _detector_sql(rule: str) -> str:
    if rule not in DETECTORS:
        raise ValueError(f"rule must be one of {', '.join(DETECTORS)}, not {rule!r}")
    return "detector_" + rule.replace("-", "_")


def _detector_params(threshold: float, window: int, options: dict) -> dict:
    if int(window) < 1:
        raise ValueError(f"a detector's window is at least 1 step, not {window!r}")
    return {"threshold": threshold, "window": int(window), "success_threshold": SUCCESS_THRESHOLD, **options}


# --- the advisor ------------------------------------------------------------------------------------------

# Each lever: its SQL (analyses/advice_<lever>.sql), a title, the dashboard page with its evidence, and what
# pulling it means. Parameters of the what-ifs, with their defaults (docs/advisor.md).
ADVICE_LEVERS = {
    "task_selection": ("Task selection", "funnel", "drop or down-weight tasks saturated in recent groups"),
    "scoring": ("Scoring", "funnel", "fix judge timeouts and verifier errors"),
    "infra": ("Infrastructure", "funnel", "remove infra errors and aborts"),
    "staleness": ("Staleness bound", "staleness", "loosen the staleness bound by one version"),
    "drafter_refresh": ("Drafter refresh", "spec_decode", "refresh the drafter so acceptance stays fresh"),
    "spec_budget": ("Speculative budget by length", "spec_decode", "draft more tokens on long generations"),
    "prefix_continuity": (
        "Prefix continuity",
        "prefill_decode",
        "keep each turn's history an exact, cached prefix (token-level rendering, sticky routing, cache room)",
    ),
    "prompt_sharing": (
        "Prompt sharing",
        "prefill_decode",
        "let a group's members share their task prompt's cache",
    ),
    "compaction": ("Compaction off", "prefill_decode", "turn context compaction off"),
    "disaggregation": (
        "Prefill-decode disaggregation",
        "prefill_decode",
        "separate prefill and decode pools",
    ),
    "tool_waits": ("Tool waits", "staleness", "more concurrent rollouts per device to hide tool waits"),
}
# What the Advisor page and `rollscope advise` say instead of ranking levers when nothing usable was consumed:
# every gain is relative to usable rollouts per device-second, and each lever reads consumed rollouts only.
ADVICE_NOTHING_USABLE = "No usable rollouts consumed in this selection yet: the levers are costed on those."
ADVICE_DEFAULTS = {
    "target_nonzero_signal": 0.80,
    "fresh_versions": 2,
    "long_tokens": 8192,
    "extra_k": 2,
    "verify_cost": 0.05,
    "stall_share": 0.5,
    "min_idle_share": 0.05,
}


def advice_base(con, run_id: str, steps=None) -> dict:
    """The measured figures every lever starts from: funnel counts and rates, device- and work-seconds per term,
    train seconds per token (``_advice_base`` in queries/sql/analyses/macros/10_advice.sql)."""
    return query_row(con, "advice_base", require_run(con, run_id), **_filters(steps, None))


def advice_lever(con, run_id: str, lever: str, steps=None, **what_if_) -> dict:
    """One lever's estimate (``analyses/advice_<lever>.sql``): applies / why_not, the figure it moves before →
    after, usable rollouts and device-seconds before → after, and ``gain`` in usable rollouts per device-second."""
    con = memo(con)
    return _advice_gains(con, run_id, steps, [_advice_lever(con, run_id, lever, steps, what_if_)])[0]


def _advice_lever(con, run_id: str, lever: str, steps, what_if_: dict) -> dict:
    """A lever's own figures, with ``_change`` (what it changes, costed by ``_advice_gains``)."""
    if lever not in ADVICE_LEVERS:
        raise ValueError(f"lever must be one of {', '.join(ADVICE_LEVERS)}, not {lever!r}")
    unknown = set(what_if_) - set(ADVICE_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown what-if parameter(s): {', '.join(sorted(unknown))}")
    base = advice_base(con, run_id, steps)  # once per Memo: every lever starts from it ($base)
    params = {**ADVICE_DEFAULTS, **DISAGGREGATION, **what_if_, **_filters(steps, None), "base": base}
    figures = query_row(con, f"advice_{lever}", run_id, **params)
    title, page, action = ADVICE_LEVERS[lever]
    return {"lever": lever, "title": title, "page": page, "action": action, **figures}


def _advice_gains(con, run_id: str, steps, levers: list[dict]) -> list[dict]:
    """The levers' rows with what each buys (device-seconds after, gain: ``analyses/advice_gains.sql``), every
    lever's change costed in one query."""
    changes = [{"lever": row["lever"], **row.pop("_change")} for row in levers]
    base = advice_base(con, run_id, steps)
    gains = query_rows(con, "advice_gains", run_id, base=base, levers=changes)
    by_lever = {gain.pop("lever"): gain for gain in gains}
    return [{**row, **by_lever[row["lever"]]} for row in levers]


def advise(con, run_id: str, steps=None, **what_if_) -> pd.DataFrame:
    """Every lever, ranked by its estimated gain in usable rollouts per device-second (those that apply first);
    one row per lever with ``evidence``, a one-line reading of its measured inputs (docs/advisor.md)."""
    import pandas as pd

    return pd.DataFrame(advice(con, run_id, steps, **what_if_))


def advice(con, run_id: str, steps=None, **what_if_) -> list[dict[str, Any]]:
    """``advise``'s rows as dicts of plain values, ``rank`` first, without pandas (`rollscope advise`). The
    measured starting point is computed once, first, and handed to every lever: each lever's query then plans
    and reads only its own figures (the base in each of them made ``advise`` 4× its hand-written baseline)."""
    con = memo(con)
    advice_base(con, run_id, steps)
    levers = {
        lever: (lambda lever=lever: _advice_lever(con, run_id, lever, steps, what_if_))
        for lever in ADVICE_LEVERS
    }
    rows = _judged(con, run_id, steps, list(together(levers).values()))
    rows.sort(key=lambda r: (not r["applies"], -(r["gain"] or 0.0)))
    return [{"rank": rank, **r} for rank, r in enumerate(rows, 1)]


def _judged(con, run_id: str, steps, levers: list[dict]) -> list[dict]:
    """The levers' rows with their gains, ``applies`` a bool, no gain where it does not apply, and evidence."""
    rows = _advice_gains(con, run_id, steps, levers)
    for row in rows:
        row["applies"] = bool(row.get("applies"))
        row["gain"] = row["gain"] if row["applies"] else None
        row["evidence"] = _evidence(row)
    return rows


# The advisor's levers against repeated prefill, one per remedy (docs/metrics.md, "Repeated prefill by remedy").
PREFILL_LEVERS = ("prefix_continuity", "prompt_sharing", "compaction")


def prefill_what_if(con, run_id: str, steps=None) -> dict[str, dict[str, Any]]:
    """Per remedy of repeated prefill (exact continuity, a group sharing its prompt, compaction off at the rate
    observed), the advisor's lever on its own: device-seconds and usable rollouts per device-second after, the
    gain, why it does not apply, its evidence (docs/advisor.md). Over the consumed steps of ``steps``: the
    fleet's device-seconds belong to no environment."""
    con = memo(con)
    advice_base(con, run_id, steps)
    levers = [_advice_lever(con, run_id, lever, steps, {}) for lever in PREFILL_LEVERS]
    return {row["lever"]: row for row in _judged(con, run_id, steps, levers)}


def realized_gain(con, run_before: str, run_after: str, steps=None) -> float | None:
    """The realized change in usable rollouts per device-second from ``run_before`` to ``run_after`` (the same
    run with a lever pulled), with each term's device-seconds at ``run_before``'s utilization, as the advisor
    costs them (``analyses/advice_realized.sql``, docs/advisor.md)."""
    require_run(con, run_after)
    filters = {"run_after": run_after, **_filters(steps, None)}
    return query_row(con, "advice_realized", require_run(con, run_before), **filters)["realized_gain"]


def _evidence(r: dict) -> str:
    """One line of the measured figures a lever rests on."""
    text = _EVIDENCE[r["lever"]]
    try:
        return text(r)
    except (TypeError, ValueError, KeyError):  # a figure not measured in this selection
        return r.get("why_not") or "not measured in this selection"


_EVIDENCE: dict[str, Callable[[dict], str]] = {
    "task_selection": lambda r: (
        f"nonzero-signal {formats.rate(r['before'])} → {formats.rate(r['after'])}; "
        f"{r['all_right_groups']:,} all-right and {r['all_wrong_groups']:,} all-wrong groups of {r['groups']:,}; "
        f"{r['saturated_tasks']:,} of {r['tasks']:,} tasks saturated in every group"
    ),
    "scoring": lambda r: (
        f"scoring {formats.rate(r['before'])} → 100 %: {r['unscored']:,} completed rollouts unscored, "
        f"{r['failed_judges']:,} judge calls failed"
        + (
            f" after {r['failed_judge_mean_s']:.1f} s each (a returning call takes {r['ok_judge_mean_s']:.1f} s)"
            if r.get("failed_judge_mean_s") is not None and r.get("ok_judge_mean_s") is not None
            else ""
        )
    ),
    "infra": lambda r: (
        f"completion {formats.rate(r['before'])} → 100 %: {r['failed']:,} rollouts failed, burning "
        f"{r['burned_device_s']:,.0f} rollout device-seconds"
    ),
    "staleness": lambda r: (
        f"freshness {formats.rate(r['before'])} → {formats.rate(r['after'])} with bound {r['bound']} → "
        f"{r['looser_bound']}: {r['beyond_bound']:,} signal-carrying samples beyond the bound; trainer idle "
        f"{formats.rate(r['trainer_idle_fraction'])}"
    ),
    "drafter_refresh": lambda r: (
        f"acceptance {formats.rate(r['before'])} now vs {formats.rate(r['after'])} just after the refresh to "
        f"{r['drafter_version']} ({r['later_tokens_per_step']:.2f} vs {r['fresh_tokens_per_step']:.2f} tokens "
        f"per verify step); up to {r['max_versions_since_refresh']} versions since a refresh"
    ),
    "spec_budget": lambda r: (
        f"k {r['before']:.0f} → {r['after']:.0f} on rollouts ≥ {r['long_tokens']:,.0f} tokens "
        f"where acceptance is {formats.rate(r['long_acceptance'])}: "
        f"{r['decode_s_where_it_pays']:,.0f} decode seconds of {r['long_decode_s']:,.0f} on long rollouts"
    ),
    "prefix_continuity": lambda r: (
        f"{r['reprefill_tokens']:,.0f} history tokens prefilled again: "
        + ", ".join(
            f"{reason.replace('_', ' ')} {r[f'{reason}_tokens']:,.0f} ({r[f'{reason}_s'] or 0:,.0f} s)"
            for reason in CONTINUITY_REASONS
            if r[f"{reason}_tokens"]
        )
        + f"; prefix-cache hit rate {formats.rate(r['cache_hit_rate'])}, "
        f"{r['prefill_s']:,.0f} prefill seconds in all"
    ),
    "prompt_sharing": lambda r: (
        f"{r['prompt_reprefill_tokens']:,.0f} task-prompt tokens prefilled again by group members "
        f"({r['prompt_reprefill_s']:,.0f} prefill seconds); first turns found "
        f"{formats.rate(r['first_turn_cached_share'])} of their prompt cached"
    ),
    "compaction": lambda r: (
        f"{r['extra_samples']:,} compactions removed {r['removed_tokens']:,.0f} tokens and made as many extra "
        f"samples, training {r['train_tokens_again']:,.0f} tokens again; prefill "
        + (
            f"{-r['compaction_prefill_s']:,.0f} s less with it"
            if r["compaction_prefill_s"] < 0
            else f"{r['compaction_prefill_s']:,.0f} s more with it"
        )
        + (": it pays for itself, keep it" if r["gain"] is not None and r["gain"] < 0 else "")
    ),
    "disaggregation": lambda r: (
        f"new-prefill : decode {r['prefill_decode_ratio']:.2f} : 1 (step CV {formats.rate(r['step_ratio_cv'])}), "
        f"{r['turns_per_rollout']:.1f} turns per rollout of {r['turn_latency_s']:.1f} s, "
        f"model {r['model_parameters'] / 1e9:.1f}B"
    ),
    "tool_waits": lambda r: (
        f"rollout servers idle {formats.rate(r['before'])} of {r['held_s']:,.0f} s ({r['idle_device_s']:,.0f} "
        f"device-seconds); tool calls {formats.rate(r['tool_wait_share'])} of rollout time"
    ),
}
# --- is it stuck: liveness, stalls, goodput (docs/metrics.md, "Health" and "Goodput") ------------------------
# "Now" is ``now_ns`` when given (wall-clock now for a live run: time.time_ns()), else the end of the run's
# newest span: close to wall-clock now while a run is being written, and meaningful for a finished run.


def liveness(con, run_id: str, now_ns: int | None = None) -> pd.DataFrame:
    """One row per writing process, the most silent first: its spans, its last span and silent_s."""
    return query(con, "liveness", require_run(con, run_id), now_ns=now_ns)


def in_flight(con, run_id: str, environment=None, now_ns: int | None = None) -> pd.DataFrame:
    """Rollouts in flight per environment: how many, the oldest's age (oldest_age_s) and id."""
    return query(con, "in_flight", require_run(con, run_id), environment=environment, now_ns=now_ns)


def in_flight_summary(con, run_id: str, environment=None, now_ns: int | None = None) -> dict:
    """Rollouts in flight over every environment, and the oldest's age, id, environment and process
    (``analyses/in_flight_summary.sql``)."""
    params = {"environment": environment, "now_ns": now_ns}
    return record(query(con, "in_flight", require_run(con, run_id), over="in_flight_summary", **params))


def scoring_latency(con, run_id: str, by: str | None = "step", steps=None, environment=None) -> pd.DataFrame:
    """Verifier and judge calls over the run or per consuming step: calls, p50_s, p99_s, max_s, timeouts."""
    by = _by(by, ("step",))
    frame = query(con, "scoring_latency", require_run(con, run_id), by=by, **_filters(steps, environment))
    return _keep_by(frame, by, ("step",))


def scoring_timeouts(con, run_id: str, steps=None, environment=None) -> int:
    """Verifier and judge calls that timed out, over the consuming steps of the selection
    (``analyses/scoring_timeouts.sql``)."""
    filters = {"by": "step", **_filters(steps, environment)}
    frame = query(con, "scoring_latency", require_run(con, run_id), over="scoring_timeouts", **filters)
    return int(frame.iat[0, 0])


def trainer_goodput(con, run_id: str, steps=None) -> pd.DataFrame:
    """The trainer's seconds per step window: computing, waiting for data, on weight sync, other."""
    return query(con, "trainer_goodput", require_run(con, run_id), **_filters(steps, None))


def rollout_goodput(con, run_id: str, steps=None) -> pd.DataFrame:
    """Rollout device-seconds per step window: generating, waiting for weights, on tools, idle."""
    return query(con, "rollout_goodput", require_run(con, run_id), **_filters(steps, None))


def wasted_devices(con, run_id: str, steps=None, environment=None) -> pd.DataFrame:
    """Rollout device-seconds per consuming step on rollouts that ended infra_error, aborted or unused."""
    return query(con, "wasted_devices", require_run(con, run_id), **_filters(steps, environment))


def goodput(con, run_id: str, steps=None, environment=None) -> dict:
    """Run (or step range) totals of the three goodput analyses, and the shares a page headlines
    (``analyses/trainer_goodput_total.sql``, ``rollout_goodput_total.sql``, ``wasted_devices_total.sql``; the
    trainer and the fleet belong to no environment: only the step range applies to them)."""
    require_run(con, run_id)
    totals = {
        "trainer_goodput": _filters(steps, None),
        "rollout_goodput": _filters(steps, None),
        "wasted_devices": _filters(steps, environment),
    }
    out = {}
    for name, filters in totals.items():
        out.update(record(query(con, name, run_id, over=f"{name}_total", **filters)))
    shares = {k: out.pop(k) for k in ("trainer_computing_share", "rollout_generating_share")}
    return {**out, **shares}  # the shares last, as the report has always listed them
