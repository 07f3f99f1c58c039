"""Prefill / decode: the balance of the two inference phases by environment, turn and step."""

import streamlit as st

from rollscope.app import calls, charts, page_frame
from rollscope.app.filters import Filters
from rollscope.queries import analyses

TOKENS = ["new_prefill_tokens", "cached_prefill_tokens", "decode_tokens"]
# The split of docs/metrics.md, "Repeated prefill by remedy" (prefill_split): what each prompt token cost, from the
# cache's (free) to each waste a remedy removes; tokens compaction removed were never prefilled (pale).
SPLIT = {
    "cached_tokens": "#cbd5e1",
    "new_tokens": "#2563eb",
    "reprefill_retokenized_tokens": "#db2777",
    "reprefill_evicted_tokens": "#ea580c",
    "reprefill_server_changed_tokens": "#f59e0b",
    "reprefill_unattributed_tokens": "#94a3b8",
    "reprefill_compacted_tokens": "#7c3aed",
    "prompt_reprefill_tokens": "#0d9488",
    "compaction_removed_tokens": "#e9d5ff",
}


def headline(filters: Filters) -> None:
    frame = calls.analysis(analyses.prefill_decode, filters)
    if frame.empty or not frame["turns"].fillna(0).sum():
        raise page_frame.NothingToShow(
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


def by_environment(filters: Filters) -> None:
    frame = calls.analysis(analyses.prefill_decode, filters, by="environment")
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


def by_turn(filters: Filters) -> None:
    frame = calls.analysis(analyses.prefill_decode, filters, by="turn_index")
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


def by_step(filters: Filters) -> None:
    frame = calls.analysis(analyses.prefill_decode, filters, by="step", rolling=("prefill_decode_ratio",))
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


def remedies(filters: Filters) -> None:
    """Repeated prefill split by the remedy that would remove it, per step and per turn index."""
    st.subheader("Repeated prefill, by remedy")
    row = analyses.record(calls.analysis(analyses.prefill_split, filters))
    cols = st.columns(4)
    cols[0].metric(
        "History prefilled again",
        charts.device_seconds(row.get("reprefill_device_s")),
        help="Earlier turns' tokens prefilled again because continuity broke (any reason), at the turns' "
        "measured prefill rate.",
    )
    cols[1].metric(
        "Task prompt prefilled again",
        charts.device_seconds(row.get("prompt_reprefill_device_s")),
        help="A group's task prompt, prefilled by members after the one that had to.",
    )
    cols[2].metric("Extra samples from compaction", charts.count(row.get("extra_samples")))
    cols[3].metric(
        "Compaction's effect",
        charts.change(row.get("compaction_usable_tokens_per_device_s_change")),
        help="On usable tokens per device-second: its saved prefill against its compacted turns' prefill "
        "and the tokens its extra samples train on again.",
    )
    left, right = st.columns(2)
    with left:
        split_chart(filters, "step", "Prompt tokens per step, by what prefilled them", "pd-split-step")
    with right:
        split_chart(filters, "turn_index", "Prompt tokens per turn, by what prefilled them", "pd-split-turn")
    st.caption(
        "Grey came from the prefix cache, blue had to be prefilled; every other colour was prefilled again and a "
        "remedy removes it: token-level rendering (retokenized), cache room (evicted), sticky routing (server "
        "changed), prompt sharing (the group's task prompt). Pale: history compaction removed, never prefilled. "
        "What to look for: wasted colours that grow with the turn index."
    )
    what_ifs(filters)


def split_chart(filters: Filters, by: str, title: str, key: str) -> None:
    frame = calls.analysis(analyses.prefill_split, filters, by=by).dropna(subset=[by])
    if frame.empty:
        st.caption("No consumed turns in this selection yet.")
        return
    x_title = "train step" if by == "step" else "turn index"
    chart = charts.bars(frame, by, list(SPLIT), title, x_title, "prompt tokens", colors=SPLIT)
    chart.update_layout(height=560, legend={"orientation": "h", "y": -0.28})  # nine parts: clear of the axis
    st.plotly_chart(chart, key=key)


WHAT_IFS = {  # lever: what the remedy is, on this page
    "prefix_continuity": "Exact continuity (no history prefilled again)",
    "prompt_sharing": "The group shares its task prompt",
    "compaction": "Compaction off (at the rate observed)",
}


def what_ifs(filters: Filters) -> None:
    levers = calls.call(filters.store, analyses.prefill_what_if, filters.run_id, steps=filters.steps)
    st.markdown("\n".join(what_if_line(lever, row) for lever, row in levers.items()))
    st.caption(
        "Each remedy pulled alone over the selected steps and every environment (the advisor's levers, "
        "docs/advisor.md). What to look for: the largest gain is the remedy to build first; a negative gain "
        "for compaction off says compaction pays for itself."
    )


def what_if_line(lever: str, row: dict) -> str:
    """One remedy's what-if as a list item: its gain and device-seconds after, then its evidence."""
    if not row["applies"]:
        return f"- **{WHAT_IFS[lever]}**: does not apply ({row['why_not']})."
    return (
        f"- **{WHAT_IFS[lever]}**: {charts.change(row['gain'])} usable rollouts per device-second "
        f"(device-seconds {charts.count(row['device_seconds'])} → {charts.count(row['device_seconds_after'])}). "
        f"{row['evidence']}."
    )


def disaggregation(filters: Filters) -> None:
    verdict = calls.analysis(analyses.disaggregation, filters)
    st.subheader("Would prefill–decode disaggregation pay?")
    show = st.success if verdict["verdict"] else st.info
    show(
        "Yes: a stable, measured imbalance at a scale where it pays."
        if verdict["verdict"]
        else "Not on this evidence: keep prefill and decode on the same workers."
    )
    st.markdown("\n".join(f"- {reason}" for reason in verdict["reasons"]))


def body(filters: Filters) -> None:
    headline(filters)
    left, right = st.columns(2)
    with left:
        by_environment(filters)
        by_step(filters)
    with right:
        by_turn(filters)
    remedies(filters)
    disaggregation(filters)


page_frame.live(
    body,
    page_frame.page(
        "Prefill / decode",
        "Agent turns prefill large observations and decode short "
        "replies: where the balance sits and what repeats.",
    ),
)
