"""The derived tables' columns and types, shipped with the SQL that defines them.

A derivation fills empty, typed tables (``_<table>_mat``). Typing them by their definitions means binding
every view and macro of ``sql/views`` and ``sql/analyses/macros`` over the raw schema: DuckDB binds a table
macro through everything it reads, and that costs ~2.5 s, the largest single cost of a run's first open on
a 1M-span run. The types depend only on that SQL, the raw schema (``store/schema.py``) and DuckDB's
version, so they are computed once, here, and shipped as ``sql/raw/derived_schemas.json`` together with a
key of what they depend on. A derivation whose key differs (SQL edited in an editable install, another
DuckDB minor version) binds every definition as before: slower, never wrong.

``python -m rollscope.queries.derived_schemas`` writes the file (``make schemas``), after the SQL generated from
the tables' declarations (``queries/tables.py``); a test keeps both equal to what they are generated from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from functools import cache

import duckdb

from rollscope.queries import sqlfiles
from rollscope.store import schema

log = logging.getLogger("rollscope.derive")

PATH = sqlfiles.SQL_DIR / "raw" / "derived_schemas.json"
# What binding the definitions reads: every file of these folders (the raw views, the derived tables'
# statements and the trace index are in raw/).
_SOURCES = ("views", "analyses/macros", "raw")


def key() -> str:
    """A digest of what the derived tables' types depend on: the defining SQL's text, the raw datasets'
    columns and DuckDB's major.minor version (a patch release does not change a type)."""
    digest = hashlib.sha256()
    for folder in _SOURCES:
        for name in sqlfiles.folder(folder):
            digest.update(name.encode() + b"\0" + sqlfiles.load(name).encode() + b"\0")
    for dataset in schema.DATASET_NAMES:
        digest.update(repr(schema.columns(dataset)).encode())
    digest.update(".".join(duckdb.__version__.split(".")[:2]).encode())
    return digest.hexdigest()[:20]


@cache
def shipped() -> dict[str, list[list[str]]] | None:
    """The shipped schemas when they were computed from this SQL and DuckDB version, else None (bind)."""
    try:
        data = json.loads(PATH.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key() or not isinstance(data.get("schemas"), dict):
        log.info("the shipped derived-table schemas are not for this SQL and DuckDB: binding the definitions")
        return None
    return data["schemas"]


@cache
def current() -> dict[str, list[list[str]]]:
    """The shipped schemas, else those binding every definition gives (once per process, seconds)."""
    from rollscope.queries import derive_db  # which imports this module

    return shipped() or derive_db.bound_schemas()


def text() -> str:
    """The file's content: the key and the bound schemas, one line per table."""
    from rollscope.queries import derive_db  # which imports this module

    tables = derive_db.bound_schemas()
    lines = [f"  {json.dumps(name)}: {json.dumps(tables[name])}" for name in sorted(tables)]
    return '{\n "key": ' + json.dumps(key()) + ',\n "schemas": {\n' + ",\n".join(lines) + "\n }\n}\n"


def main() -> int:
    from rollscope.queries import tables

    for name in tables.write():  # the SQL generated from the declarations first: the types bind it
        print(f"wrote {name}.sql", file=sys.stderr)
    PATH.write_text(text())
    print(f"wrote {PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
