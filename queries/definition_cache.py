"""Definitions (views, macros, empty tables) kept in the user's cache as a DuckDB file and copied into a new
database, instead of created there again.

Why: DuckDB binds a view or a table macro when it is created, through every view and macro it reads. A
derivation's database created its ~150 definitions in 0.27 s of CPU, a reader's in 0.13 s, on every
connection: what a dashboard catching up live runs, `rollscope derive --all` or the test suite (hundreds of
connections) paid again and again. ``COPY FROM DATABASE … (SCHEMA)`` of the same definitions, stored bound,
takes ~0.015 s. A file is written once per set of definitions (the ``key`` of their text and the DuckDB that
stores them), beside its name and renamed, as the readers' schema files are (``reader._schema_dir``): no
process sees half of one, and none leaves anything in the temp folder, killed or not. A cache that cannot be
written costs what creating the definitions costs, as before.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path

import duckdb

from rollscope.queries import sqlfiles

log = logging.getLogger("rollscope.derive")

KEEP = 16  # definition files kept in the cache (those of other SQL or DuckDB versions): the newest


def key(*texts: str) -> str:
    """A digest of what a set of definitions is made from (their statements, the files they read, the code
    that runs them: ``source``) and of the DuckDB version that stores them."""
    digest = hashlib.sha256(duckdb.__version__.encode())
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


@cache
def source(module_file: str) -> str:
    """The text of the module at ``module_file`` (its ``__file__``), for a ``key``: the Python that creates a
    set of definitions is part of what they are made from (an edit takes a new process to run anyway)."""
    return Path(module_file).read_text()


def path(kind: str, digest: str) -> Path:
    """Where the definitions of ``kind`` ("derive", "reader") with ``digest`` are kept."""
    from rollscope import settings

    return settings.cache_dir() / f"definitions-{kind}-{digest}.duckdb"


def copy_or_create(con, kind: str, texts: list[str], create: Callable[[], None]) -> None:
    """The definitions of ``kind`` made from ``texts`` (``key``) in ``con``: copied from the user's cache where
    a connection kept them, else ``create()``d in ``con`` and kept there for the next."""
    kept = path(kind, key(*texts))
    if not copy_into(con, kept):
        create()
        keep(con, kept)


def copy_into(con, kept: Path) -> bool:
    """Copy the definitions kept at ``kept`` into ``con``'s database; False when there are none to copy (not
    written yet, removed, or not a file DuckDB reads: then removed, to be written again)."""
    if not kept.is_file():
        return False
    try:
        sqlfiles.execute(con, "definitions/copy_in", path=str(kept))
        return True
    except duckdb.Error as e:
        log.warning("the definitions kept in %s could not be read (%s): creating them", kept, e)
        sqlfiles.execute(con, "definitions/let_go")
        with suppress(OSError):
            kept.unlink()
        return False


def keep(con, kept: Path) -> None:
    """Write ``con``'s definitions (its database's, without rows) to ``kept`` for the next connections."""
    written = kept.with_name(f".{kept.name}-{secrets.token_hex(4)}")
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        sqlfiles.execute(con, "definitions/keep", path=str(written))
        written.replace(kept)
    except (OSError, duckdb.Error) as e:  # a cache that cannot be written
        log.debug("definitions could not be kept in %s: %s", kept.parent, e)
        sqlfiles.execute(con, "definitions/let_go")
        with suppress(OSError):
            written.unlink(missing_ok=True)
        return
    _prune(kept.parent)


def _prune(cache: Path) -> None:
    """Remove all but the newest ``KEEP`` definition files, and any file a process killed while writing one
    left (``keep``'s dot-named files) an hour ago or more."""
    with suppress(OSError):
        found = sorted(cache.glob("definitions-*.duckdb"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in found[KEEP:]:
            old.unlink(missing_ok=True)
        for left in cache.glob(".definitions-*"):
            if left.stat().st_mtime < time.time() - 3600:
                left.unlink(missing_ok=True)
