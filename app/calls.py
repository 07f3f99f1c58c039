"""What the pages read: ``queries`` functions called for a run and cached until its data changes.

Pages hold no SQL: they pass the ``queries`` functions themselves (``calls.analysis(analyses.funnel,
filters)``) and draw the frames and dicts these return. Results are cached per run and per ``Reader.version``
(``st.cache_data``; the reader says when what it reads changed), so a refresh that found nothing new costs one
directory listing. Below that cache, the analyses of one run and version are computed once for every page and
call that reads them (``queries.analyses.Memo``): the Overview's checks and trends reuse what its report
computed, the Compare page the compute terms and funnel of both reports.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial

import pandas as pd
import streamlit as st

from rollscope import formats
from rollscope.app.filters import Filters
from rollscope.app.readers import live_store
from rollscope.app.threads import at_once
from rollscope.queries import analyses, trace
from rollscope.queries import checks as queries_checks
from rollscope.queries import report as queries_report

# Modules whose functions take an analyses.Memo in place of a connection (they share computed analyses).
MEMO_MODULES = frozenset(m.__name__ for m in (analyses, queries_report, queries_checks))


@st.cache_data(show_spinner=False)
def _generation(store: str) -> str:
    """A new token each time the result cache is cleared, so that the analyses kept under it go too."""
    return uuid.uuid4().hex


@st.cache_data(show_spinner=False, max_entries=2048)
def _cached(store: str, version: int, name: str, _function: Callable, args: tuple, options: tuple):
    """``_function``'s result, cached per store, run data version and arguments (``name``: its key)."""
    live, started = live_store(store), time.perf_counter()
    run_id = args[0]
    memoized = _function.__module__ in MEMO_MODULES

    def answer():
        con = live.memo(run_id, _generation(store)) if memoized else live.cursor(run_id)
        return _function(con, *args, **dict(options))

    result = live.reader(run_id).retrying(answer)  # again on a fresh listing if a compaction moved a file
    live.computed(time.perf_counter() - started)
    return result


def call(store: str, function: Callable, run_id: str, *args, **options):
    """``function(con, run_id, *args, **options)`` (a function of ``rollscope.queries``), cached until that
    run's data changes."""
    version = live_store(store).version(run_id)
    name = f"{function.__module__}.{function.__qualname__}"
    return _cached(store, version, name, function, (run_id, *args), tuple(sorted(options.items())))


def analysis(function: Callable, filters: Filters, run_id: str | None = None, **options):
    """``function(con, run, steps=..., environment=..., **options)`` for the page's run (or ``run_id``), step
    range and environment: every analysis a page shows takes both filters."""
    scope = {"steps": filters.steps, "environment": filters.environment}
    return call(filters.store, function, run_id or filters.run_id, **scope, **options)


def checks(filters: Filters) -> pd.DataFrame:
    """``queries.checks.run_checks`` as a table: failing rules first (✗), each value and threshold written
    the way its message states it (``48.0 %``, not ``0.475``). The checks read the whole run."""

    results = sorted(call(filters.store, queries_checks.run_checks, filters.run_id), key=lambda r: r.ok)
    return pd.DataFrame(
        {
            "": ["✓" if r.ok else "✗" for r in results],
            "check": [r.name for r in results],
            "value": [formats.check_value(r.value, r.unit) for r in results],
            "threshold": [formats.check_value(r.threshold, r.unit) for r in results],
            "message": [r.message for r in results],
        }
    )


def alert_events(filters: Filters) -> pd.DataFrame:
    """The alerts `rollscope watch` recorded for the page's run (``queries.alerts``): a small file, read anew on
    every draw, so a live page shows an alert as soon as the watch records it."""
    from rollscope.queries import alerts

    return alerts.events(filters.store, filters.run_id)


def rollouts(filters: Filters, **search) -> object:
    """``trace.search`` for the page's run, step range and environment."""
    return call(
        filters.store,
        trace.search,
        filters.run_id,
        environment=filters.environment,
        steps=filters.steps,
        limit=trace.SEARCH_LIMIT,
        **search,
    )


def rollout(filters: Filters, rollout_id: str) -> tuple[dict | None, object, object]:
    """One rollout's outcome and consumer, its spans for the waterfall and its group's attempts with rewards
    and advantages, computed at once, each read in the rollout's time window (``trace.window``, looked up once
    for the three)."""
    bounds = call(filters.store, trace.window, filters.run_id, rollout_id)
    found = dict(
        at_once(
            {
                "rollout": partial(call, filters.store, trace.rollout, filters.run_id, rollout_id, bounds),
                "spans": partial(call, filters.store, trace.spans, filters.run_id, rollout_id, bounds),
                "group": partial(call, filters.store, trace.group, filters.run_id, rollout_id, bounds),
            }
        )
    )
    return found["rollout"], found["spans"], found["group"]


def window(filters: Filters, rollout_id: str) -> dict:
    """Where in time the rollout's spans and messages can be (``trace.window``): what each of its lookups
    reads within, looked up once per rollout and run version."""
    return call(filters.store, trace.window, filters.run_id, rollout_id)


def examples(filters: Filters, selection, *, scoped: bool = True, **options):
    """``queries.examples.rollouts`` of ``selection`` for the page's run, in its step range and environment
    (``scoped``; else the whole run, as the checks read it)."""
    from rollscope.queries import examples as queries_examples

    scope = {"steps": filters.steps, "environment": filters.environment} if scoped else {}
    return call(filters.store, queries_examples.rollouts, filters.run_id, selection, **scope, **options)


def examples_inline(filters: Filters) -> bool:
    """Whether the page picks its figures' examples itself (``queries.examples.inline``), else links to lists."""
    from rollscope.queries import examples as queries_examples

    return call(filters.store, queries_examples.inline, filters.run_id)


def continuity(filters: Filters, rollout_id: str):
    """The rollout's turns with where prefix continuity broke and where compaction happened (``trace.continuity``),
    read in its time window (``trace.window``, cached with the rollout's other lookups)."""
    return call(filters.store, trace.continuity, filters.run_id, rollout_id, window(filters, rollout_id))
