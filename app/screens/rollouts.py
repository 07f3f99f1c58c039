"""Rollouts: find rollouts, and open one as a waterfall of its turns, tools, rewards and judges."""

import streamlit as st

from rollscope.app import charts, data
from rollscope.collectors.semconv import ROLLOUT_STATUSES
from rollscope.queries.trace import SEARCH_LIMIT

STATUSES = [None, *ROLLOUT_STATUSES]
COLUMNS = {  # column: how it reads (None: as it is)
    "rollout_id": None,
    "environment": None,
    "task_id": None,
    "rollout_status": None,
    "reward": charts.number,
    "policy_version": charts.count,
    "train_step": charts.count,
    "sample_decision": None,
    "sample_staleness": charts.count,
    "turns": charts.count,
    "decoded_tokens": charts.count,
    "new_prefill_tokens": charts.count,
    "duration_s": charts.seconds,
    "start_time": lambda t: "—" if charts.missing(t) else t.strftime("%Y-%m-%d %H:%M:%S"),
}


def readable(frame, columns: dict):
    """The frame's columns as the page shows them: counts with separators, durations with units."""
    shown = frame[list(columns)].copy()
    for column, form in columns.items():
        if form is not None:
            shown[column] = [form(v) for v in shown[column]]
    return shown.rename(columns={"duration_s": "duration", "start_time": "started"})


def search(filters: data.Filters):
    cols = st.columns([3, 2, 1, 1])
    text = cols[0].text_input("Rollout or task id contains", key="rollout-text")
    status = cols[1].selectbox(
        "Status", STATUSES, key="rollout-status", format_func=lambda s: "any status" if s is None else s
    )
    low = cols[2].number_input("Reward ≥", value=None, key="rollout-reward-min")
    high = cols[3].number_input("Reward ≤", value=None, key="rollout-reward-max")
    reward = None if low is None and high is None else (low, high)
    found = data.rollouts(filters, text=text or None, status=status, reward=reward)
    st.caption(
        f"{charts.count(len(found))} rollouts (newest first, at most {SEARCH_LIMIT}); the sidebar's "
        "environment and step range apply."
    )
    st.dataframe(readable(found, COLUMNS), hide_index=True, height=240, width="stretch", key="found")
    return found


def outcome(rollout: dict) -> None:
    st.markdown(
        f"Environment **{rollout['environment'] or '—'}** · task `{rollout['task_id']}` · group "
        f"`{rollout['group_id']}`"
    )
    cols = st.columns(4)
    cols[0].metric("Status", rollout["rollout_status"])
    cols[1].metric("Reward", charts.number(rollout["reward"]))
    cols[2].metric(
        "Policy version", charts.count(rollout["policy_version"]), help="The policy that generated it."
    )
    cols[3].metric("Duration", charts.seconds(rollout["duration_s"]))
    if rollout["train_step"] is None:
        st.info("Not consumed by the trainer yet (no `rl.sample` span names this rollout).")
    else:
        st.success(
            f"Consumed by train step **{rollout['train_step']}**, which trained policy version "
            f"**{charts.count(rollout['trained_policy_version'])}**: decision "
            f"**{rollout['sample_decision']}**, staleness {charts.count(rollout['sample_staleness'])} "
            "versions."
        )


GROUP_COLUMNS = {
    "rollout_id": None,
    "rollout_status": None,
    "reward": charts.number,
    "advantage": charts.number,
    "advantage_z": charts.number,
    "turns": charts.count,
    "decoded_tokens": charts.count,
    "duration_s": charts.seconds,
}


def group(attempts) -> None:
    if attempts.empty:
        st.caption("This rollout records no group_id: no sibling attempts to compare its reward with.")
        return
    st.markdown(f"**Its group: {len(attempts)} attempts** (this rollout marked ▶)")
    shown = readable(attempts, GROUP_COLUMNS)
    shown.insert(0, "", ["▶" if this else "" for this in attempts["this_rollout"]])
    st.dataframe(shown, hide_index=True, width="stretch", key="group")
    st.caption(
        "advantage = reward − the group's mean reward; advantage z = that over the rewards' standard deviation "
        "(— when all rewards are equal: the group gives no signal)."
    )


def trace(filters: data.Filters, rollout_id: str) -> None:
    rollout, spans, attempts = data.rollout(filters, rollout_id)
    if rollout is None:
        st.warning(f"Rollout {rollout_id!r} is not in run {filters.run_id}.")
        return
    outcome(rollout)
    group(attempts)
    marks = data.continuity(filters, rollout_id)
    st.plotly_chart(charts.waterfall(spans, marks), key="waterfall")
    st.caption(
        "What to look for: gaps between turns (tool or queue waits), a judge or reward long after the "
        "last turn, and how long the rollout waited before a train step consumed it. ⟲ marks a turn that "
        "prefilled its history again (and why), ✂ one that starts from a compacted context."
    )
    continuity(marks)
    with st.expander("Spans"):
        st.dataframe(spans, hide_index=True, width="stretch")


CONTINUITY_COLUMNS = {
    "turn_index": charts.count,
    "context_tokens": charts.count,
    "history_cached_tokens": charts.count,
    "reprefill_tokens": charts.count,
    "continuity_break": None,
    "compaction_tokens_before": charts.count,
    "compaction_tokens_after": charts.count,
    "sample": charts.count,
}


def continuity(marks) -> None:
    """The turns where continuity broke or compaction happened, with their history's tokens."""
    marked = marks[marks["continuity_break"].notna() | marks["compaction_tokens_before"].notna()]
    if marked.empty:
        return
    samples = int(marks["sample"].max()) + 1
    st.markdown(
        f"**Prefix continuity and compaction**: {len(marked)} of {len(marks)} turns marked"
        + (f"; compaction made it {samples} training samples" if samples > 1 else "")
    )
    st.dataframe(readable(marked, CONTINUITY_COLUMNS), hide_index=True, width="stretch", key="continuity")


def body(filters: data.Filters) -> None:
    found = search(filters)
    if found.empty:
        st.info("No rollout matches these filters.")
        return
    st.subheader("One rollout")
    rollout_id = st.selectbox("Open rollout", found["rollout_id"].tolist(), key="open-rollout")
    trace(filters, rollout_id)


data.live(
    body,
    data.page(
        "Rollouts",
        "Search the run's rollouts and open one: every span of it on one time "
        "axis, and the train step that consumed it.",
    ),
)
