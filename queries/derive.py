"""Deriving one run's tables (``queries/tables.py`` declares them) from its raw segments, as Parquet parts: which
way this catch-up takes.

The store layer decides when a run needs deriving, holds the run's lock and publishes the result; ``derive``
picks one of three ways, each in a module of its own:

* **full** (``derive_full``, ``queries/pieces.py``): every table from every span of the run, in pieces of
  consecutive steps derived in parallel. The reference: used for a run's first catch-up and whenever the
  incremental path cannot be sure (``catch_up.Fallback``; store/derived.py lists when).
* **tables** (``pieces.derive_tables``): a state whose tables' definitions changed (``queries/definitions.py``)
  takes those tables again from the others' parts, when each of them reads only derived tables.
* **incremental** (``queries/catch_up.py``): the scope the new segments can change, derived from its spans
  alone, each table's rows of the scoped steps (or rollouts) replaced block part by block part; the "run" tables
  brought up to date by their refresh rule (``queries/refresh.py``).

All of them run in the database ``queries/derive_db.py`` opens (under ``ROLLSCOPE_DERIVE_MEMORY``, spilling to
disk) and write parts as ``queries/parquet_parts.py`` does. A full derivation tells its progress to the listener
of ``progress``.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import duckdb

from rollscope.queries import definitions
from rollscope.queries.catch_up import Fallback, derive_scoped
from rollscope.store import derived, layout
from rollscope.store.derived import Job, Result

log = logging.getLogger("rollscope.derive")


def derive(job: Job) -> Result:
    """Bring ``job.run_id``'s tables up to date: incrementally from ``job.previous`` when it can be sure,
    else in full. Writes new parts under ``job.staging``.

    A compaction may move a listed segment aside while this runs (``store.compaction``): then it derives
    again, the same way, from the same files where they now are (``layout.resolve``): the same rows, so the
    listing it was given (and the manifest naming it) stays true."""
    while True:
        try:
            return _derive(job)
        except (duckdb.IOException, FileNotFoundError):
            moved, said = layout.resolve(job.live), layout.resolve(job.messages)
            if moved is None or said is None or (moved, said) == (job.live, job.messages):
                raise  # gone for good: the caller lists again
            log.info("run %s: a compaction moved listed segments aside: deriving again", job.run_id)
            _clear(job.staging)
            job = dataclasses.replace(job, live=moved, messages=said)


def _derive(job: Job) -> Result:
    if job.previous is not None and (stale := definitions.changed(job.previous.meta.get("definitions"))):
        # Tables whose definition changed since the state was derived: those that read only other derived
        # tables are derived again from them, when the state holds every live segment; else all, in full.
        if derived.up_to_date(job.previous, job.live) and not any(map(definitions.reads_raw, stale)):
            from rollscope.queries import pieces

            log.info("run %s: definitions changed: deriving %s again", job.run_id, ", ".join(stale))
            return pieces.derive_tables(job, stale)
        log.info("run %s: deriving in full: the definitions of %s changed", job.run_id, ", ".join(stale))
        return derive_full(job)
    if job.previous is not None:
        try:
            return derive_scoped(job)
        except Fallback as why:
            log.info("run %s: deriving in full: %s", job.run_id, why)
        _clear(job.staging)  # what the scoped attempt wrote
    return derive_full(job)


def _clear(staging: Path) -> None:
    for entry in staging.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def derive_full(job: Job) -> Result:
    """Every table from every span of the run, in pieces of consecutive steps (``queries/pieces.py``), its
    progress told to the ``progress`` listener of this context."""
    from rollscope.queries import pieces

    listener, started = _listener.get(), time.monotonic()
    if listener is None:
        return pieces.derive_full(job)

    def report(fraction: float, what: str) -> None:
        elapsed = time.monotonic() - started
        left = elapsed / fraction * (1 - fraction) if fraction >= 0.1 else None  # once the plan is known
        listener(job.run_id, fraction, what, left)

    return pieces.derive_full(job, report)


# A full derivation's progress, for a command or page that opens a run: (run id, fraction done, what is being
# derived, about how many seconds are left or None while that is not known yet).
Progress = Callable[[str, float, str, float | None], None]


_listener: ContextVar[Progress | None] = ContextVar("rollscope_derive_progress", default=None)


@contextmanager
def progress(listener: Progress):
    """Tell ``listener`` how each full derivation started in this context goes (``Progress``): the command
    line draws a bar on stderr, the dashboard a progress element. An incremental catch-up, seconds at most,
    tells nothing."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
