"""The documented views and their columns, read from DuckDB itself so README.md cannot drift from them.

``python -m queries.catalog`` prints the README's "Views" table.
"""

from __future__ import annotations

import tempfile

from rollscope.queries import sqlfiles
from rollscope.store.schema import EXTRA_FIELDS, SPAN_FIELDS, SPAN_SCHEMA

VIEW_DOCS = {
    "spans": "every span: ids, name, times, status, a column per convention, other attributes as JSON",
    "rollouts": "one row per rollout, with its reward (own, or from its reward/judge spans)",
    "turns": "one row per policy generation (rl.turn, vLLM llm_request, GenAI chat spans)",
    "tools": "tool calls and sandbox executions",
    "rewards": "verifier spans",
    "judges": "model-judge spans",
    "teachers": "teacher / reference scoring spans",
    "train_steps": "optimiser steps",
    "samples": "the trainer's decision about each rollout",
    "weight_syncs": "policy weights reaching rollout workers",
    "collector_stats": "latest exported / dropped / failed counts per writing process",
    "runs": "one row per run: spans, rollouts, steps, first/last time",
}


def view_columns(con) -> dict[str, list[str]]:
    return {
        view: [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()]  # view names are our constants
        for view in VIEW_DOCS
    }


def markdown() -> str:
    from rollscope.queries.reader import Reader

    with tempfile.TemporaryDirectory() as empty:
        columns = view_columns(Reader(empty).con)
    conventions = set(SPAN_SCHEMA.names) - {f.name for f in SPAN_FIELDS + EXTRA_FIELDS}
    columns["spans"] = [c for c in columns["spans"] if c not in conventions] + [
        "every column of docs/semconv.md"
    ]
    lines = ["| view | what | columns |", "|---|---|---|"]
    lines += [f"| `{v}` | {VIEW_DOCS[v]} | {', '.join(columns[v])} |" for v in VIEW_DOCS]
    return "\n".join(lines)


def view_names() -> list[str]:
    return [name.split("_", 1)[1] for name in sqlfiles.folder("views")]


if __name__ == "__main__":
    print(markdown())
