"""Each derived table's definition as a digest, so a change re-derives the tables it changes and no other.

A run's manifest keeps the digest of every table it holds (``meta["definitions"]``). A table's digest covers
the statement of ``sql/raw/derive_full.sql`` that fills it, every view and macro that statement reads, and
theirs, down to the raw spans (as a derivation binds them: the views of ``sql/raw/derived_views.sql`` in place
of the definitions they replace), its declaration in ``queries/tables.py`` and its columns, and the digests of
the derived tables it reads (``_<table>_mat``): a change anywhere beneath a table changes its digest and
every digest above it. A state whose digests differ from this code's is brought up to date table by table
(``queries/derive.py``): the tables whose digest changed are derived again, the others kept as they are.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

from rollscope.queries import derived_schemas, sqlfiles
from rollscope.queries.tables import TABLES

_DEFINED = re.compile(r"CREATE OR REPLACE (?:TEMP )?(?:VIEW|MACRO) (\w+)", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_NOT_NAMES = re.compile(r"--[^\n]*|'(?:[^']|'')*'")  # comments and string literals
_FILLS = re.compile(r"INSERT INTO _(\w+)_mat\b")
# What reads the raw segments (spans, and messages for the transcript flags), in a derivation (a table whose definition reaches one of these reads segments).
RAW = frozenset({"raw_spans", "raw_collector_stats", "raw_messages"})


@cache
def _definitions() -> dict[str, str]:
    """Every view's and macro's defining statement, as a derivation holds them: the derived views replace
    the definitions of the names they give."""
    found: dict[str, str] = {}
    for folder in ("views", "analyses/macros"):
        for name in sqlfiles.folder(folder):
            for statement, _, _ in sqlfiles.statements(name):
                if match := _DEFINED.search(statement):
                    found[match[1]] = statement
    for statement, _, _ in sqlfiles.statements("raw/derived_views"):
        if match := _DEFINED.search(statement):
            found[match[1]] = statement
    return found


@cache
def _fills() -> dict[str, str]:
    """Each table's statement of derive_full.sql."""
    return {m[1]: s for s, _, _ in sqlfiles.statements("raw/derive_full") if (m := _FILLS.search(s))}


def _reads(text: str, table: str) -> tuple[list[str], set[str], bool]:
    """The definitions a table's statement reaches (sorted texts), the derived tables it reads, and whether it
    reads raw spans."""
    definitions, tables = _definitions(), {t.name for t in TABLES}
    seen: set[str] = set()
    read: set[str] = set()
    raw = False
    pending = [text]
    while pending:
        for name in set(_NAME.findall(_NOT_NAMES.sub(" ", pending.pop()))):
            if name.startswith("_") and name.endswith("_mat") and name[1:-4] in tables:
                if name[1:-4] != table:
                    read.add(name[1:-4])
            elif name in RAW:
                raw = True
            elif name in definitions and name not in seen:
                seen.add(name)
                pending.append(definitions[name])
    return sorted(definitions[n] for n in seen), read, raw


@cache
def digests() -> dict[str, str]:
    """Every derived table's digest (module docstring), computed once per process."""
    schemas = derived_schemas.current()
    done: dict[str, str] = {}
    for table in TABLES:  # in derivation order: a table reads only earlier ones
        text = _fills()[table.name]
        reached, read, _ = _reads(text, table.name)
        digest = hashlib.sha256()
        for part in (text, *reached, repr(table), repr(schemas.get(table.name))):
            digest.update(part.encode() + b"\0")
        for name in sorted(read):
            digest.update(f"{name}={done.get(name, '?')}".encode() + b"\0")
        done[table.name] = digest.hexdigest()[:16]
    return done


@cache
def reads_raw(name: str) -> bool:
    """Whether table ``name``'s definition reads the raw spans (else only other derived tables)."""
    return _reads(_fills()[name], name)[2]


def changed(kept: dict | None) -> list[str]:
    """The tables whose digest differs from ``kept`` (a manifest's), in derivation order."""
    kept = kept if isinstance(kept, dict) else {}
    return [t.name for t in TABLES if kept.get(t.name) != digests()[t.name]]
