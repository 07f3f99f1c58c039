"""Links between pages, and the lines that name example rollouts: from a figure to the transcripts behind it.

Addresses are relative (``./rollouts?…``), so they work under any base path, with every value URL-encoded. A
name the job gave (a rollout id) that goes into a markdown line does so as a code span (``code``), where neither
markdown nor Streamlit's ``:color[…]`` directives apply, so an id is never markup.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd

from rollscope.queries import examples


def code(text) -> str:
    """Untrusted text for a markdown line: one line of at most 120 characters, in a code span."""
    return "`" + " ".join(str(text).replace("`", "ˋ").split())[:120] + "`"


def rollouts(run_id: str, **params) -> str:
    """The Rollouts page with ``params`` (``rollout=`` opens one; ``stage=``, ``reason=``, ``examples=`` …
    filter its list); None values are left out."""
    return "./rollouts?" + urlencode({"run": run_id, **{k: v for k, v in params.items() if v is not None}})


def viewer(run_id: str, rollout_id: str) -> str:
    """The Rollouts page opening one rollout's transcript."""
    return rollouts(run_id, rollout=rollout_id)


def listing(run_id: str, key: str, selection: examples.Selection, steps=None, environment=None) -> str:
    """The Rollouts page listing a whole selection: a funnel loss as its stage and reason filters, another
    selection by its ``key`` (``examples.named``)."""
    scope = {"steps": None if steps is None else f"{steps[0]}-{steps[1]}", "environment": environment}
    if selection.kind == "lost":
        stage, reason = selection.params["lost_at"], selection.params.get("lost_reason")
        return rollouts(run_id, stage=stage, reason=reason, **scope)
    return rollouts(run_id, examples=key, **scope)


def listing_line(run_id: str, key: str, selection: examples.Selection, **scope) -> str:
    """``Examples: list the rollouts lost at nonzero signal``, a link to the whole selection on the Rollouts page,
    for a figure whose examples are not picked on its own page (a check that passes, a lever that does not
    apply): the link costs no query, and a run of millions of rollouts pays for the selection when it is opened."""
    return f"Examples: [list the {selection.what}]({listing(run_id, key, selection, **scope)})"


def example_line(run_id: str, key: str, selection: examples.Selection, found: pd.DataFrame, **scope) -> str:
    """``Examples: `s3-g1-0` · `s3-g4-2` … (5 of the 72 rollouts lost at nonzero signal) · all of them``, each
    a link (markdown, ids as code spans)."""
    if found.empty:
        return f"Examples: none ({examples.count_line(found, selection)} in this selection)."
    ids = " · ".join(f"[{code(r)}]({viewer(run_id, r)})" for r in found["rollout_id"])
    every = f"[list all {int(found['total'].iloc[0]):,}]({listing(run_id, key, selection, **scope)})"
    return f"Examples: {ids} ({examples.count_line(found, selection)}) · {every}"
