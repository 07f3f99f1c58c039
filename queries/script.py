"""The views as one SQL script for clients that are not rollscope (the duckdb CLI, DBeaver, a notebook)."""

from __future__ import annotations

from pathlib import Path

from rollscope.errors import StoreError
from rollscope.queries import sqlfiles
from rollscope.queries.derive_db import sql_list
from rollscope.store import layout as store
from rollscope.store.schema import DATASET_NAMES


def views_script(store_dir: Path | str) -> str:
    """A snapshot of the store's current segments with every view on top; run it again to see new ones.

    The views here derive everything from the raw segments per query (a client without rollscope cannot
    catch derived tables up); the derived Parquet files are read as docs/store.md describes."""
    root = Path(store_dir).resolve()
    lines = ["-- rollscope views over " + str(root), ""]
    # Under a key=value folder, hive partitioning would read that folder as a column too: the by-filename views.
    raw = sqlfiles.load("raw/raw_views_by_filename" if "=" in str(root) else "raw/raw_views")
    for dataset in DATASET_NAMES:
        files = [str(p.resolve()) for p in store.segments(store_dir, dataset)]
        if not files and dataset == "messages":  # a store without transcripts: the view is there, empty
            raw = _without_messages(raw)
            continue
        if not files:
            raise StoreError("Empty store", f"{store_dir} has no {dataset} segments yet")
        raw = raw.replace(f"@{dataset}_files", sql_list(files))
    lines += [raw]
    lines += [sqlfiles.load(n) for n in [*sqlfiles.folder("views"), *sqlfiles.folder("analyses/macros")]]
    return "\n".join(lines)


def _without_messages(raw: str) -> str:
    """The raw views' script with ``raw_messages`` as an empty view of the dataset's columns."""
    from rollscope.store.schema import DUCKDB_TYPES, columns

    head = raw[: raw.index("CREATE OR REPLACE VIEW raw_messages")]
    names = ", ".join(f'CAST(NULL AS {DUCKDB_TYPES[t]}) AS "{c}"' for c, t in columns("messages"))
    return f"{head}CREATE OR REPLACE VIEW raw_messages AS SELECT {names}, CAST(NULL AS VARCHAR) AS run_id WHERE false;\n"
