"""Advisor: which lever buys the most usable rollouts per device-second on this run, with its evidence."""

import streamlit as st

from rollscope.app import calls, charts, links, page_frame
from rollscope.app.filters import Filters
from rollscope.app.pages import TITLES
from rollscope.queries import analyses, examples
from rollscope.queries.analyses import ADVICE_DEFAULTS


def what_if() -> dict:
    """The editable what-if settings (docs/advisor.md), defaults from queries.analyses.ADVICE_DEFAULTS."""
    cols = st.columns(3)
    target = cols[0].slider(
        "Target nonzero-signal rate (task selection)",
        0.5,
        1.0,
        ADVICE_DEFAULTS["target_nonzero_signal"],
        0.05,
        key="advisor-target",
    )
    extra_k = cols[1].number_input(
        "Extra drafted tokens on long rollouts", 1, 8, int(ADVICE_DEFAULTS["extra_k"]), key="advisor-extra-k"
    )
    long_tokens = cols[2].select_slider(
        "Long rollouts: decoded tokens from",
        [2048, 4096, 8192, 16384],
        int(ADVICE_DEFAULTS["long_tokens"]),
        key="advisor-long",
    )
    return {"target_nonzero_signal": float(target), "extra_k": int(extra_k), "long_tokens": int(long_tokens)}


def ranking(filters: Filters, settings: dict) -> None:
    # every environment together: a lever's gain is over the run's whole fleet (the environment filter is not used)
    frame = calls.call(filters.store, analyses.advise, filters.run_id, steps=filters.steps, **settings)
    if frame.empty or not frame["usable"].fillna(0).sum():
        raise page_frame.NothingToShow(analyses.ADVICE_NOTHING_USABLE)
    applies = frame[frame["applies"]].copy()
    if not applies.empty:
        st.plotly_chart(
            charts.bars(
                applies,
                "title",
                ["gain"],
                "Estimated gain per lever",
                "change in usable rollouts per device-second",
                "lever",
                horizontal=True,
                percent=True,
            ),
            key="advisor-gain",
        )
        st.caption(
            "Each lever pulled alone to the stated setting (docs/advisor.md). What to look for: the top bar is "
            "the lever to pull first; levers within a few points of each other are a toss-up."
        )
    for row in frame.to_dict("records"):
        lever(filters, row)


def lever(filters: Filters, row: dict) -> None:
    gain = charts.rate(row["gain"]) if row["applies"] else "does not apply"
    st.subheader(f"{row['rank']}. {row['title']}: {gain}")
    st.write(f"{row['action'].capitalize()}. {row['evidence']}")
    if row["applies"]:
        st.caption(
            f"What-if: usable rollouts {charts.count(row['usable'])} → {charts.count(row['usable_after'])}, "
            f"device-seconds {charts.count(row['device_seconds'])} → {charts.count(row['device_seconds_after'])}."
        )
    else:
        st.caption(f"Why not: {row['why_not']}.")
    st.markdown(f"Evidence: [{TITLES[row['page']]}](./{row['page']}?run={filters.run_id})")
    selection = examples.LEVERS.get(row["lever"])
    key = f"lever:{row['lever']}"
    if selection is not None and row["applies"] and calls.examples_inline(filters):  # else its list alone
        found = calls.examples(filters, selection, scoped=False, steps=filters.steps, **lever_options(row))
        st.caption(links.example_line(filters.run_id, key, selection, found, steps=filters.steps))
    elif selection is not None:
        st.caption(links.listing_line(filters.run_id, key, selection, steps=filters.steps))


def lever_options(row: dict) -> dict:
    """What-if settings a lever's examples follow: long rollouts start where the lever's setting says."""
    return (
        {"min_tokens": int(row["long_tokens"])}
        if row["lever"] == "spec_budget" and row.get("long_tokens")
        else {}
    )


filters = page_frame.page(
    "Advisor",
    "Which lever buys the most usable rollouts per device-second on this run, and by how much (docs/advisor.md).",
)
settings = what_if()
page_frame.live(lambda f: ranking(f, settings), filters)
