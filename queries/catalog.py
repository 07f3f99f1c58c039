"""The documented views and their columns, read from DuckDB itself so docs/views.md cannot drift from them.

``python -m rollscope.queries.catalog`` prints docs/views.md's "Views" table.
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
    "samples": "the trainer's decision about each rollout (one per training sample: compaction makes several)",
    "weight_syncs": "policy weights reaching rollout workers",
    "collector_stats": "latest exported / dropped / failed counts per writing process",
    "runs": "one row per run: spans, rollouts, steps, first/last time",
    "messages": "one row per message of the transcripts: what the agent was sent and said, tool calls and "
    "results, judge prompts and rationales",
}


# The table macros a query can call like a view (docs/views.md lists them too).
MACRO_DOCS = {
    "rollout_steps('RUN')": "one row per rollout: its consuming train step, staleness and recorded sample decision",
    "rollout_stages('RUN')": "one row per rollout: its funnel stage flags, the stage it was lost at and why",
    "consumed_samples('RUN', NULL, NULL, NULL)": "one row per consumed sample (step range and environment "
    "filters): step, staleness, decision, the run's bound",
}


def documented_columns() -> dict[str, list[str]]:
    """Each documented view's columns, read from DuckDB over an empty store (no data needed)."""
    from rollscope.queries.reader import Reader

    with tempfile.TemporaryDirectory() as empty:
        return view_columns(Reader(empty).con)


def view_columns(con) -> dict[str, list[str]]:
    return {
        view: [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()]  # view names are our constants
        for view in VIEW_DOCS
    }


def markdown() -> str:
    columns = documented_columns()
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
