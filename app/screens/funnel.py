"""Funnel: how much generated experience reaches the trainer, where the rest is lost, and what-ifs."""

import streamlit as st

from rollscope.app import charts, data

RATE_LABELS = {
    "completion": "Completion",
    "scoring": "Scoring",
    "nonzero_signal": "Nonzero signal",
    "freshness": "Freshness",
}


def overall(filters: data.Filters) -> dict:
    frame = data.analysis("funnel", filters)
    if frame.empty or not frame["dispatched"].sum():
        raise data.NothingToShow("No rollouts in this selection yet.")
    row = frame.iloc[0].to_dict()
    st.plotly_chart(charts.funnel(row), key="funnel")
    st.caption(
        "What to look for: the narrowest step. dispatched × the four rates = usable (docs/metrics.md)."
    )
    return row


def by_step(filters: data.Filters) -> None:
    frame = data.analysis("funnel", filters, by="step").dropna(subset=["step"])
    if frame.empty:
        return
    st.plotly_chart(
        charts.lines(
            frame,
            "step",
            list(charts.RATES),
            "Stage rates per consuming train step",
            "train step",
            "rate",
            percent=True,
        ),
        key="rates-by-step",
    )
    st.caption(
        "What to look for: a rate falling as training goes on; nonzero signal falls as tasks get solved."
    )


def by_environment(filters: data.Filters) -> None:
    frame = data.analysis("funnel", filters, by="environment")
    st.plotly_chart(
        charts.bars(
            frame,
            "environment",
            list(charts.RATES),
            "Stage rates per environment",
            "environment",
            "rate",
            stacked=False,
            percent=True,
        ),
        key="rates-by-env",
    )
    st.caption("What to look for: one environment losing most of its rollouts at one stage.")


def losses(filters: data.Filters) -> None:
    frame = data.analysis("funnel_losses", filters)
    if frame.empty:
        st.caption("No rollout was lost in this selection.")
        return
    frame = frame.assign(where=frame["stage"] + ": " + frame["reason"])
    st.plotly_chart(
        charts.bars(
            frame, "where", ["lost"], "Rollouts lost, by stage and reason", "rollouts", "", horizontal=True
        ),
        key="losses",
    )
    st.caption("What to look for: the largest bar is the cheapest experience to win back.")


def what_if(row: dict) -> None:
    st.subheader("What if")
    st.caption(
        "Move a rate and see the usable experience it yields, and the decode-throughput increase "
        "that would be worth the same."
    )
    rates = {name: float(row[f"{name}_rate"] or 0.0) for name in RATE_LABELS}
    columns = st.columns(len(rates))
    new_rates = {
        name: columns[i].slider(RATE_LABELS[name], 0.0, 1.0, rates[name], 0.01, key=f"what-if-{name}")
        for i, name in enumerate(rates)
    }
    result = data.what_if(int(row["dispatched"]), rates, new_rates)
    cols = st.columns(3)
    cols[0].metric("Usable now (rollouts)", charts.number(result["usable"], 0))
    cols[1].metric("Usable with these rates", charts.number(result["new_usable"], 0))
    cols[2].metric("Worth a decode-throughput increase of", charts.rate(result["throughput_gain"]))


def body(filters: data.Filters) -> None:
    row = overall(filters)
    left, right = st.columns(2)
    with left:
        by_step(filters)
    with right:
        by_environment(filters)
    losses(filters)
    what_if(row)


data.live(
    body,
    data.page("Funnel", "How much generated experience reaches the trainer, and where the rest is lost."),
)
