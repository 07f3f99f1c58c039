"""Compute: where the accelerators' time and FLOPs go, step by step, and the work around a training token."""

import pandas as pd
import streamlit as st

from rollscope.app import calls, charts, page_frame
from rollscope.app.filters import Filters
from rollscope.queries import analyses
from rollscope.semconv import COMPUTE_TERMS

MEASURES = {"device-seconds": ("device_seconds", "device-seconds"), "FLOPs": ("flops", "FLOP")}


def totals(filters: Filters, work: dict) -> None:
    table = calls.analysis(analyses.compute_terms, filters).set_index("term")
    c_total = table.iloc[0]  # flops_total and device_seconds_total are on every row
    row = st.columns(4)
    row[0].metric(
        "C_total accelerator time",
        charts.device_seconds(c_total["device_seconds_total"]),
        help="Device-seconds of rollout, train, teacher and judge processes (devices × busy time).",
    )
    row[1].metric("C_total FLOPs", charts.flops(c_total["flops_total"]))
    row[2].metric(
        "C_env CPU time",
        charts.device_seconds(table.at["env", "device_seconds"], "CPU"),
        help="Σ tool and sandbox durations; CPU, not summed with accelerators.",
    )
    row[3].metric(
        "Wasted compute",
        charts.rate(work.get("wasted_compute_share")),
        help="Share of rollout + judge + teacher FLOPs spent on rollouts that never became usable.",
    )
    like = c_total["device_seconds_total"]
    shown = pd.DataFrame(
        {
            "term": [f"C_{t}" for t in table.index],
            "FLOPs": [charts.flops(v) for v in table["flops"]],
            "share of C_total FLOPs": [charts.rate(v) for v in table["flops_share"]],
            "device time": [
                charts.device_seconds(v, "CPU" if t == "env" else "device", like=like)
                for t, v in table["device_seconds"].items()
            ],
            "share of accelerator time": [charts.rate(v) for v in table["device_seconds_share"]],
        }
    )
    st.dataframe(shown, hide_index=True, width="stretch", key="compute-terms")
    st.caption(
        "C_env is CPU time in sandboxes and tools: beside the accelerator terms, never summed with them."
    )


def per_step(filters: Filters) -> None:
    measure = st.segmented_control("Measure", list(MEASURES), default="device-seconds", key="compute-measure")
    column, unit = MEASURES[measure or "device-seconds"]
    frame = calls.analysis(analyses.compute_terms, filters, by="step")
    env = frame[frame["term"] == "env"]
    frame = frame[frame["term"].isin(COMPUTE_TERMS)]
    if frame.empty:
        st.caption("No compute recorded per step yet.")
        return
    wide = (
        frame.assign(step=frame["step"].astype("string").fillna("not consumed"))
        .pivot_table(index="step", columns="term", values=column, aggfunc="sum", sort=False)
        .reset_index()
    )
    present = [t for t in COMPUTE_TERMS if t in wide.columns]
    fig = charts.bars(
        wide,
        "step",
        present,
        f"Compute per consuming train step ({unit})",
        "train step",
        unit,
        colors=charts.TERM_COLORS,
    )
    if column == "device_seconds" and not env.empty:  # C_env is CPU time: its own axis, never stacked
        env = env.assign(step=env["step"].astype("string").fillna("not consumed"))
        charts.second_axis(fig, env, "step", "device_seconds", "env (CPU-seconds, right axis)", "CPU-seconds")
    st.plotly_chart(fig, key="compute-by-step")
    st.caption("What to look for: rollout dwarfing train (an inference-heavy run), or judge/teacher growing.")


def token_work(work: dict) -> None:
    st.subheader("The work around one usable training token")
    uses = {
        "generated": work.get("generated"),
        "re-prefilled": work.get("reprefilled"),
        "trained": work.get("trained"),
        "teacher-scored": work.get("teacher_scored"),
    }
    row = st.columns(len(uses) + 1)
    for i, (name, value) in enumerate(uses.items()):
        row[i].metric(f"Times {name}", charts.number(value))
    row[-1].metric("Tokens generated per usable token", charts.number(work.get("generated_per_usable_token")))
    st.caption(
        "What to look for: many generated tokens per usable one means most decoding is thrown away; "
        "re-prefills above 1 mean history is computed again each turn."
    )


def body(filters: Filters) -> None:
    work = calls.analysis(analyses.token_work, filters)
    totals(filters, work)
    per_step(filters)
    token_work(work)


page_frame.live(
    body,
    page_frame.page(
        "Compute",
        "C_total = C_rollout + C_train + C_teacher + C_judge + C_env: what the "
        "run pays for (docs/metrics.md).",
    ),
)
