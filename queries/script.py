"""The views as one SQL script for clients that are not rollscope (the duckdb CLI, DBeaver, a notebook)."""

from __future__ import annotations

from pathlib import Path

from rollscope.errors import StoreError
from rollscope.queries import sqlfiles
from rollscope.store import layout as store
from rollscope.store.schema import DATASETS


def views_script(store_dir: Path | str) -> str:
    """A snapshot of the store's current segments with every view on top; run it again to see new ones."""
    lines = ["-- rollscope views over " + str(Path(store_dir).resolve()), ""]
    for dataset in DATASETS:
        files = [str(p.resolve()) for p in store.segments(store_dir, dataset)]
        if not files:
            raise StoreError("Empty store", f"{store_dir} has no {dataset} segments yet")
        quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        lines.append(f"SET VARIABLE rollscope_{dataset}_files = [{quoted}];")
    lines += [sqlfiles.load("raw/point_view")]
    lines += [sqlfiles.load(n) for n in [*sqlfiles.folder("views"), *sqlfiles.folder("analyses/macros")]]
    return "\n".join(lines)
