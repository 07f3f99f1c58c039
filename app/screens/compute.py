"""Compute: where the accelerators' time and FLOPs go, step by step, and the work around a training token."""

import streamlit as st

from rollscope.app import charts, data

MEASURES = {"device-seconds": ("device_seconds", "device-seconds"), "FLOPs": ("flops", "FLOP")}
TERMS = ["rollout", "train", "teacher", "judge"]


def totals(filters: data.Filters, work: dict) -> None:
    terms = data.analysis("compute_terms", filters).set_index("term")
    row = st.columns(4)
    row[0].metric("Accelerator time", charts.seconds(terms.loc[TERMS, "device_seconds"].sum()))
    row[1].metric("FLOPs", charts.flops(terms.loc[TERMS, "flops"].sum()))
    row[2].metric(
        "Environment CPU time",
        charts.seconds(terms.at["env", "device_seconds"]),
        help="Σ tool and sandbox durations; CPU, not summed with accelerators.",
    )
    row[3].metric(
        "Wasted compute",
        charts.rate(work.get("wasted_compute_share")),
        help="Share of rollout + judge + teacher FLOPs spent on rollouts that never became usable.",
    )


def per_step(filters: data.Filters) -> None:
    measure = st.segmented_control("Measure", list(MEASURES), default="device-seconds", key="compute-measure")
    column, unit = MEASURES[measure or "device-seconds"]
    frame = data.analysis("compute_terms", filters, by="step")
    frame = frame[frame["term"].isin(TERMS)]
    if frame.empty:
        st.caption("No compute recorded per step yet.")
        return
    wide = (
        frame.assign(step=frame["step"].astype("string").fillna("not consumed"))
        .pivot_table(index="step", columns="term", values=column, aggfunc="sum", sort=False)
        .reset_index()
    )
    present = [t for t in TERMS if t in wide.columns]
    st.plotly_chart(
        charts.bars(wide, "step", present, f"Compute per consuming train step ({unit})", "train step", unit),
        key="compute-by-step",
    )
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


def body(filters: data.Filters) -> None:
    work = data.analysis("token_work", filters)
    totals(filters, work)
    per_step(filters)
    token_work(work)


data.live(
    body,
    data.page(
        "Compute",
        "C_total = C_rollout + C_train + C_teacher + C_judge + C_env: what the "
        "run pays for (docs/metrics.md).",
    ),
)
