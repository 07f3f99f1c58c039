"""Funnel: how much generated experience reaches the trainer, where the rest is lost, and what-ifs."""

from functools import partial

import streamlit as st

from rollscope.app import calls, charts, links, page_frame, threads
from rollscope.app.filters import Filters
from rollscope.queries import analyses
from rollscope.queries import examples as queries_examples
from rollscope.semconv import FUNNEL_STAGE_RATES

WHAT_IF_STEP_POINTS = 20  # the first view raises the weakest stage by this many points (README: 60 % → 80 %)
RATE_LABELS = {rate: charts.label(rate).capitalize() for rate in FUNNEL_STAGE_RATES}  # "Nonzero signal"


def overall(filters: Filters) -> dict:
    frame = calls.analysis(analyses.funnel, filters)
    if frame.empty or not frame["dispatched"].sum():
        raise page_frame.NothingToShow("No rollouts in this selection yet.")
    row = frame.iloc[0].to_dict()
    st.plotly_chart(charts.funnel(row), key="funnel")
    st.caption(
        "What to look for: the narrowest step. dispatched × the four rates = usable (docs/metrics.md)."
    )
    return row


def by_step(filters: Filters) -> None:
    frame = calls.analysis(analyses.funnel, filters, by="step", rolling=tuple(charts.RATES))
    frame = frame.dropna(subset=["step"])
    if frame.empty:
        return
    st.plotly_chart(
        charts.per_step(
            frame, list(charts.RATES), "Stage rates per consuming train step", "rate", percent=True
        ),
        key="rates-by-step",
    )
    st.caption(
        f"Each step's rate (pale) and its mean over {charts.ROLLING_STEPS} steps. What to look for: a rate falling "
        "as training goes on; nonzero signal falls as tasks get solved."
    )


def by_environment(filters: Filters) -> None:
    frame = calls.analysis(analyses.funnel, filters, by="environment")
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


def losses(filters: Filters) -> None:
    frame = calls.analysis(analyses.funnel_losses, filters)
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
    examples(filters, frame)


def examples(filters: Filters, losses) -> None:
    """Each loss's example rollouts, a link each to its transcript: what the lost experience looked like."""
    losses = list(zip(losses["stage"], losses["reason"], losses["lost"], strict=True))
    selections = [queries_examples.lost(stage, reason) for stage, reason, _ in losses]
    scope = {"steps": filters.steps, "environment": filters.environment}
    # A long run's losses each link to their list, whose examples are picked when it is opened.
    inline = calls.examples_inline(filters)
    if inline:
        found = threads.at_once(
            {i: partial(calls.examples, filters, sel) for i, sel in enumerate(selections)}
        )
    lines = []
    for i, ((stage, reason, lost), sel) in enumerate(zip(losses, selections, strict=True)):
        if inline:
            shown = links.example_line(filters.run_id, "", sel, found[i], **scope)
        else:
            shown = f"{charts.count(lost)} · " + links.listing_line(filters.run_id, "", sel, **scope)
        lines.append(f"- **{charts.label(stage)} · {reason}**: {shown}")
    how = "a few of each loss (from distinct groups)" if inline else "each loss's rollouts listed"
    st.markdown(f"**What the lost rollouts did**, {how}:\n" + "\n".join(lines))


def what_if(row: dict) -> None:
    st.subheader("What if")
    measured = {name: row[f"{name}_rate"] for name in RATE_LABELS}
    # A rate with nothing to measure yet (no group with two scored attempts: nonzero signal is NaN) starts at 0
    rates = {name: 0.0 if charts.missing(rate) else float(rate) for name, rate in measured.items()}
    weakest = min(rates, key=rates.get)
    start = {name: round(100 * rate) for name, rate in rates.items()}
    start[weakest] = min(100, start[weakest] + WHAT_IF_STEP_POINTS)
    st.caption(
        f"Move a rate and see the usable experience it yields, and the decode-throughput increase worth the "
        f"same. It starts with the weakest stage, {RATE_LABELS[weakest].lower()} "
        f"({charts.rate(rates[weakest])}), raised by {WHAT_IF_STEP_POINTS} points; the others at their "
        "current rates (shown under each slider)."
    )
    columns = st.columns(len(rates))
    new_rates = {}
    for i, name in enumerate(rates):
        with columns[i]:
            chosen = st.slider(
                f"{RATE_LABELS[name]} (%)", 0, 100, start[name], 1, format="%d %%", key=f"what-if-{name}"
            )
            st.caption(f"now {charts.rate(measured[name])}")
        new_rates[name] = chosen / 100 if chosen != round(100 * rates[name]) else rates[name]
    result = analyses.what_if(int(row["dispatched"]), rates, new_rates)
    cols = st.columns(3)
    cols[0].metric("Usable now (rollouts)", charts.number(result["usable"], 0))
    cols[1].metric("Usable with these rates", charts.number(result["new_usable"], 0))
    cols[2].metric("Worth a decode-throughput increase of", charts.rate(result["throughput_gain"]))


def body(filters: Filters) -> None:
    row = overall(filters)
    left, right = st.columns(2)
    with left:
        by_step(filters)
    with right:
        by_environment(filters)
    losses(filters)
    what_if(row)


page_frame.live(
    body,
    page_frame.page(
        "Funnel", "How much generated experience reaches the trainer, and where the rest is lost."
    ),
)
