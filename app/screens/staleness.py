"""Staleness & throughput: how far behind the policy samples are, and whether the trainer waits for data."""

import streamlit as st

from rollscope.app import calls, charts, page_frame
from rollscope.app.filters import Filters
from rollscope.queries import analyses


def staleness(filters: Filters) -> None:
    summary = calls.analysis(analyses.staleness_summary, filters)
    if not summary["samples"]:
        bound = "none declared" if summary["bound"] is None else f"{summary['bound']} policy versions"
        st.info(f"No consumed samples in this selection yet (staleness bound: {bound}).")
        return
    bound = summary["bound"]
    cols = st.columns(5)
    cols[0].metric(
        "Mean staleness", charts.number(summary["mean"]), help="Policy versions behind, on average."
    )
    cols[1].metric("Max staleness", charts.count(summary["max"]), help="Policy versions behind, at most.")
    cols[2].metric(
        "Within the bound",
        charts.rate(summary["within_bound_share"]),
        help=f"Share of consumed samples at most {bound} policy versions behind (staleness.within_bound_share).",
    )
    cols[3].metric(
        "Beyond the bound",
        charts.count(summary["beyond_bound"]),
        help=f"Consumed samples more than {bound} versions behind, used or not (staleness.beyond_bound); "
        f"{charts.count(summary['unused_beyond_bound'])} of them were not used.",
    )
    cols[4].metric(
        "Used beyond the bound",
        charts.count(summary["used_beyond_bound"]),
        help="Samples the trainer used although beyond the bound: the violations proper; should be 0 "
        "(staleness.used_beyond_bound, the staleness-violations check).",
    )
    frame = calls.analysis(analyses.staleness, filters)
    st.plotly_chart(
        charts.histogram(
            frame,
            "staleness",
            "samples",
            "Consumed samples by staleness",
            "policy versions behind",
            "samples",
            bound=summary["bound"],
            bound_label=f"bound = {summary['bound']}",
        ),
        key="staleness",
    )
    st.caption(
        "What to look for: mass right of the bound is experience thrown away (or, if trained on, off-policy)."
    )


def over_time(filters: Filters) -> None:
    st.subheader("Staleness over time")
    timing = calls.analysis(analyses.staleness_timing, filters)
    if timing.empty:
        return
    st.plotly_chart(
        charts.bars(
            timing,
            "step",
            ["in_flight_versions_mean", "queued_versions_mean"],
            "Mean staleness per step: in flight vs queued",
            "train step",
            "policy versions behind (mean)",
        ),
        key="staleness-split",
    )
    st.caption(
        "In flight: versions the trainer produced while the rollout generated; queued: versions produced after "
        "it finished, while it waited for a train step. What to look for: queued staleness means finished "
        "samples wait (the trainer is the bottleneck); in-flight staleness means long rollouts."
    )
    st.plotly_chart(
        charts.lines(
            timing,
            "step",
            ["in_flight_s_mean", "queued_s_mean"],
            "Mean seconds in flight and queued per step",
            "train step",
            "seconds (mean per sample)",
            names=["in flight (dispatch → end)", "queued (end → consumed)"],
        ),
        key="staleness-seconds",
    )
    st.caption(
        "What to look for: queued seconds growing step after step: the trainer falls behind the fleet."
    )
    bias = calls.analysis(analyses.stale_bias, filters)
    if len(bias) > 1:
        st.markdown("**What dropping stale samples keeps out** (rollouts with a signal)")
        st.dataframe(bias, hide_index=True)
        st.caption(
            "What to look for: dropped samples longer, slower or less often solved than kept ones mean dropping "
            "stale samples trains the policy toward short, fast, easy problems."
        )


def trainer(filters: Filters, figures: dict) -> None:
    st.subheader("Trainer")
    cols = st.columns(2)
    cols[0].metric(
        "Trainer idle fraction",
        charts.rate(figures["trainer_idle_fraction"]),
        help="Σ train_wait_s / Σ train step duration.",
    )
    cols[1].metric(
        "Decode throughput (tokens/s)",
        charts.number(figures["rollout_tokens_per_s"], 0),
        help="Decoded tokens / seconds from the first turn's start to the last turn's end; — while the turns "
        f"span less than 1 s (now {charts.seconds(figures.get('rate_window_s'))}).",
    )
    # train steps belong to no environment: only the step range applies
    frame = calls.call(
        filters.store,
        analyses.trainer_steps,
        filters.run_id,
        steps=filters.steps,
        rolling=("trainer_idle_fraction",),
    )
    if not frame.empty:
        st.plotly_chart(
            charts.per_step(
                frame,
                ["trainer_idle_fraction"],
                "Trainer idle fraction per step",
                "share of the step spent waiting",
                percent=True,
            ),
            key="idle-by-step",
        )
        st.caption(
            f"Each step's idle fraction (pale) and its mean over {charts.ROLLING_STEPS} steps. What to look for: a trainer waiting "
            "for data means rollouts are the bottleneck."
        )


def tails(figures: dict) -> None:
    st.subheader("Rollout length tail and tool waits")
    lengths, durations = st.columns(4), st.columns(4)
    for i, q in enumerate(("p50", "p90", "p99")):
        lengths[i].metric(f"Rollout length {q} (tokens)", charts.count(figures[f"length_{q}"]))
        durations[i].metric(f"Rollout duration {q}", charts.seconds(figures[f"duration_{q}_s"]))
    lengths[3].metric(
        "Time in tools",
        charts.rate(figures["tool_wait_share"]),
        help="Share of rollout time spent waiting on tool and sandbox calls.",
    )
    st.caption(
        "What to look for: p99 far above p50 means a few long rollouts hold back each step; a large "
        "tool share means sandboxes, not the model, set the pace."
    )
    if figures.get("dropped_spans") or figures.get("failed_spans"):
        st.warning(
            f"The collectors lost spans: {charts.count(figures['dropped_spans'])} dropped, "
            f"{charts.count(figures['failed_spans'])} failed; figures undercount."
        )


def body(filters: Filters) -> None:
    staleness(filters)
    over_time(filters)
    figures = calls.analysis(analyses.throughput, filters)
    trainer(filters, figures)
    tails(figures)


page_frame.live(
    body,
    page_frame.page(
        "Staleness & throughput",
        "Asynchronous RL trades freshness for throughput: how stale samples are, and who waits for whom.",
    ),
)
