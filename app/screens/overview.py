"""Overview: the headline figures of `rollscope report`, the funnel in one line, checks and trends."""

from collections.abc import Iterable
from functools import partial

import pandas as pd
import streamlit as st

from rollscope.app import calls, charts, links, page_frame, threads
from rollscope.app.filters import Filters
from rollscope.queries import analyses, examples, report
from rollscope.semconv import FUNNEL_RATES

PERCENT = {"nonzero_signal_rate", "acceptance_rate", "trainer_idle_fraction"}
TRENDS = {
    "reward_mean": "Mean reward per step (score)",
    "usable": "Usable rollouts per step (count)",
    "nonzero_signal_rate": "Nonzero-signal rate per step",
    "acceptance_rate": "Spec-decode acceptance per step",
    "prefill_decode_ratio": "New prefill : decode per step",
    "trainer_idle_fraction": "Trainer idle fraction per step",
    "staleness_mean": "Mean staleness per step (versions)",
}


def headline(figures: dict) -> None:
    funnel, compute = figures["funnel"], figures["compute"]
    row = st.columns(4)
    row[0].metric("Rollouts dispatched", charts.count(funnel["dispatched"]))
    row[1].metric("Usable rollouts", charts.count(funnel["usable"]), help="Reached the trainer and counted.")
    row[2].metric("Usable rate", charts.rate(funnel["rates"]["usable"]))
    row[3].metric(
        "Wasted compute",
        charts.rate(compute["wasted_compute_share"]),
        help="Share of rollout + judge + teacher FLOPs spent on rollouts that never became usable.",
    )
    row = st.columns(4)
    number, unit = charts.device_time(compute["device_seconds"]["total"])
    row[0].metric(
        f"Accelerator time, {unit}",
        number,
        help="Device time (devices × seconds, or hours) of rollout, train, teacher and judge processes.",
    )
    row[1].metric("New prefill : decode", charts.ratio(figures["prefill_decode"]["ratio"]))
    row[2].metric("Spec-decode acceptance", charts.rate(figures["spec_decode"]["acceptance_rate"]))
    row[3].metric("Trainer idle", charts.rate(figures["trainer"]["idle_fraction"]))


def funnel_line(funnel: dict) -> str:
    stages = [f"**{charts.count(funnel['dispatched'])}** dispatched"]
    for stage, rate in list(FUNNEL_RATES.items())[:-1]:  # each stage with its rate, up to usable
        stages.append(
            f"**{charts.count(funnel[stage])}** {charts.label(stage)} ({charts.rate(funnel['rates'][rate])})"
        )
    return " → ".join(stages) + f" = **{charts.count(funnel['usable'])}** usable"


def checks(filters: Filters, results: pd.DataFrame) -> None:
    st.subheader("Checks")
    failing = results[results[""] == "✗"]
    st.caption(
        f"{len(failing)} of {len(results)} checks fail (`rollscope check`; thresholds in docs/report.md)."
        if len(failing)
        else f"All {len(results)} checks pass (`rollscope check`; thresholds in docs/report.md)."
    )
    selections = {c: examples.CHECKS[c] for c in results["check"] if c in examples.CHECKS}
    picked = set(failing["check"]) if calls.examples_inline(filters) else set()
    found = threads.at_once(  # examples picked for the failing checks; a passing one links to its list
        {c: partial(calls.examples, filters, s, scoped=False) for c, s in selections.items() if c in picked}
    )
    for row in results.itertuples(index=False):  # failing first, in red (an st.error means the page broke)
        if row[0] == "✗":
            st.markdown(
                f":red-background[:material/cancel: **{row.check}** fails]: :red[{row.message}]  \n"
                f"value {row.value}, threshold {row.threshold}"
            )
        else:
            st.markdown(f":green[:material/check_circle: **{row.check}**]: {row.message}")
        if row.check in selections:
            key, selection = f"check:{row.check}", selections[row.check]
            st.caption(
                links.example_line(filters.run_id, key, selection, found[row.check])
                if row.check in found
                else links.listing_line(filters.run_id, key, selection)
            )


def trends(series_by_metric: Iterable[tuple[str, pd.DataFrame]]) -> None:
    st.subheader("Trends")
    st.caption(
        f"Per consuming train step: each step's value (pale) and its rolling mean over {charts.ROLLING_STEPS} steps "
        "(dark). What to look for: a rate sliding step after step (the workload drifting as the policy learns)."
    )
    columns = st.columns(3)
    for i, (metric, series) in enumerate(series_by_metric):
        title = TRENDS[metric]
        with columns[i % 3]:
            if series.empty:
                st.caption(f"{title}: no steps yet")
            else:
                fig = charts.sparkline(series, "step", metric, title, percent=metric in PERCENT)
                st.plotly_chart(fig, key=f"trend-{metric}")


def body(filters: Filters) -> None:
    # Every figure of the page asked for at once; each is drawn as it is ready (threads.at_once).
    ready = threads.at_once(
        {
            "headline": partial(calls.analysis, report.headline, filters),
            "checks": partial(calls.checks, filters),
            **{m: partial(calls.analysis, analyses.trend, filters, metric=m, rolling=True) for m in TRENDS},
        }
    )
    _, figures = next(ready)
    if not figures["funnel"]["dispatched"]:
        st.info(
            f"No rollouts in run {filters.run_id} for this selection yet: figures fill in as rollout "
            "spans arrive."
        )
    headline(figures)
    st.markdown(funnel_line(figures["funnel"]))
    st.caption("What to look for: the stage with the lowest rate is where experience is lost (see Funnel).")
    checks(filters, next(ready)[1])
    trends(ready)


page_frame.live(
    body,
    page_frame.page(
        "Overview",
        "The run at a glance: experience, compute and the trainer, as `rollscope report` prints them.",
    ),
)
