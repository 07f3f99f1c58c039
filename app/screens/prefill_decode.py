"""Prefill / decode: the balance of the two inference phases by environment, turn and step."""

import streamlit as st

from rollscope.app import charts, data
from rollscope.queries import analyses

TOKENS = ["new_prefill_tokens", "cached_prefill_tokens", "decode_tokens"]


def headline(filters: data.Filters) -> None:
    frame = data.analysis(analyses.prefill_decode, filters)
    if frame.empty or not frame["turns"].fillna(0).sum():
        raise data.NothingToShow(
            "No turns in this selection: the run records no `rl.turn` (or vLLM) spans yet."
        )
    row = frame.iloc[0]
    cols = st.columns(4)
    cols[0].metric("New prefill : decode", charts.ratio(row["prefill_decode_ratio"]))
    cols[1].metric("Prefix-cache hit rate", charts.rate(row["cache_hit_rate"]))
    cols[2].metric(
        "Re-prefill waste (tokens)",
        charts.count(row["reprefill_waste_tokens"]),
        help="History tokens prefilled again because the cache did not hold them.",
    )
    cols[3].metric("Turns", charts.count(row["turns"]))


def by_environment(filters: data.Filters) -> None:
    frame = data.analysis(analyses.prefill_decode, filters, by="environment")
    st.plotly_chart(
        charts.bars(
            frame,
            "environment",
            TOKENS,
            "Tokens per environment (log scale)",
            "environment",
            "tokens (log scale)",
            stacked=False,
            log=True,
        ),
        key="pd-env",
    )
    st.caption(
        "On a log scale, so a small environment stays visible beside a large one. What to look for: "
        "environments with large tool outputs sit far on the prefill side."
    )


def by_turn(filters: data.Filters) -> None:
    frame = data.analysis(analyses.prefill_decode, filters, by="turn_index")
    st.plotly_chart(
        charts.lines(
            frame,
            "turn_index",
            ["prefill_decode_ratio"],
            "New prefill : decode by turn",
            "turn index",
            "new prefill tokens per decoded token",
            support="turns",
        ),
        key="pd-turn",
    )
    st.caption(
        "A point's size (and its hover, or the n=… beside it) says how many turns it rests on: late turn "
        "indices rest on few rollouts. What to "
        "look for: a ratio growing with every turn means history is prefilled again."
    )
    st.plotly_chart(
        charts.bars(frame, "turn_index", TOKENS[:2], "Cached vs new prefill by turn", "turn index", "tokens"),
        key="pd-cache",
    )
    st.caption(
        "What to look for: later turns should be mostly cached; new prefill there is re-prefill waste."
    )


def by_step(filters: data.Filters) -> None:
    frame = data.analysis(analyses.prefill_decode, filters, by="step", rolling=("prefill_decode_ratio",))
    frame = frame.dropna(subset=["step"])
    if not frame.empty:
        st.plotly_chart(
            charts.per_step(
                frame,
                ["prefill_decode_ratio"],
                "New prefill : decode per step",
                "new prefill tokens per decoded token",
            ),
            key="pd-step",
        )
        st.caption(
            f"Each step's ratio (pale) and its mean over {charts.ROLLING_STEPS} steps. What to look for: a stable ratio is what "
            "makes a fixed prefill/decode split pay."
        )


def disaggregation(filters: data.Filters) -> None:
    verdict = data.analysis(analyses.disaggregation, filters)
    st.subheader("Would prefill–decode disaggregation pay?")
    show = st.success if verdict["verdict"] else st.info
    show(
        "Yes: a stable, measured imbalance at a scale where it pays."
        if verdict["verdict"]
        else "Not on this evidence: keep prefill and decode on the same workers."
    )
    st.markdown("\n".join(f"- {reason}" for reason in verdict["reasons"]))


def body(filters: data.Filters) -> None:
    headline(filters)
    left, right = st.columns(2)
    with left:
        by_environment(filters)
        by_step(filters)
    with right:
        by_turn(filters)
    disaggregation(filters)


data.live(
    body,
    data.page(
        "Prefill / decode",
        "Agent turns prefill large observations and decode short "
        "replies: where the balance sits and what repeats.",
    ),
)
