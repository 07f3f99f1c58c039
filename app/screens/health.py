"""Health: the alerts a watch sent, is the run stuck — rollouts in flight, silent processes, scoring latency — and
where time waits."""

import streamlit as st

from rollscope.app import calls, charts, page_frame
from rollscope.app.filters import Filters
from rollscope.errors import StoreError
from rollscope.queries import analyses, report

TRAINER = ["computing_s", "data_wait_s", "sync_wait_s", "other_s"]
FLEET = ["generating_device_s", "weights_wait_device_s", "tools_wait_device_s", "idle_device_s"]
WASTED = ["infra_error_device_s", "aborted_device_s", "unused_device_s"]


def liveness(filters: Filters) -> None:
    st.subheader("Liveness")
    figures = calls.call(filters.store, report.health, filters.run_id)
    cols = st.columns(4)
    cols[0].metric(
        "Rollouts in flight",
        charts.count(figures["in_flight"]),
        help="Rollouts with spans in "
        "the store but no rl.rollout span yet (it is written when the rollout ends).",
    )
    cols[1].metric(
        "Oldest in flight",
        charts.seconds(figures["oldest_in_flight_s"]),
        help=f"Rollout {figures['oldest_in_flight_rollout'] or '—'}: now − its first span's start.",
    )
    cols[2].metric("Most silent process", figures["most_silent_process"] or "—")
    cols[3].metric(
        "Silent for",
        charts.seconds(figures["most_silent_s"]),
        help="Now − the end of its last span. Now = the end of the run's newest span.",
    )
    frame = calls.call(filters.store, analyses.liveness, filters.run_id)
    st.plotly_chart(
        charts.bars(
            frame,
            "instance_id",
            ["silent_s"],
            "Time since each process's last span",
            "seconds since its last span",
            "process",
            horizontal=True,
        ),
        key="health-silence",
    )
    st.caption(
        "Now is the end of the run's newest span (close to wall-clock now while a run is written). What to "
        "look for: one worker far longer silent than its peers went quiet (hung, crashed or cut off); "
        "`rollscope check` flags it (the stall rule)."
    )
    flying = calls.call(filters.store, analyses.in_flight, filters.run_id, environment=filters.environment)
    if flying.empty:
        st.caption("No rollout in flight: every rollout with spans in the store has ended.")
    else:
        st.plotly_chart(
            charts.bars(
                flying,
                "environment",
                ["oldest_age_s"],
                "Oldest rollout in flight per environment",
                "environment",
                "age of the oldest (s)",
            ),
            key="health-in-flight",
        )
        st.caption(
            "What to look for: an oldest age far above your longest rollouts is a rollout that will never "
            "finish (slow is a long tail; stuck keeps growing)."
        )


def scoring(filters: Filters) -> None:
    st.subheader("Scoring latency")
    frame = calls.analysis(analyses.scoring_latency, filters)
    frame = frame[frame["step"].notna()]
    if frame.empty:
        st.caption("No verifier or judge calls consumed by a train step yet.")
        return
    wide = frame.pivot_table(index="step", columns="kind", values=["p50_s", "p99_s"]).reset_index()
    wide.columns = ["step", *(f"{kind} {q[:3]}" for q, kind in wide.columns[1:])]
    ys = [c for c in wide.columns if c != "step"]
    st.plotly_chart(
        charts.lines(
            wide, "step", ys, "Scoring latency per step", "train step", "seconds per call", names=ys
        ),
        key="health-scoring",
    )
    timeouts = calls.analysis(analyses.scoring_timeouts, filters)
    st.caption(
        f"Verifier (rl.reward) and judge (rl.judge) calls by the step that consumed their rollout; "
        f"{charts.count(timeouts)} timeouts in this selection. What to look for: p99 "
        "climbing towards the judge's timeout is a scoring stall that holds every step back."
    )


def goodput(filters: Filters) -> None:
    st.subheader("Goodput")
    totals = calls.analysis(analyses.goodput, filters)
    cols = st.columns(3)
    cols[0].metric(
        "Trainer computing",
        charts.rate(totals["trainer_computing_share"]),
        help="Share of the trainer's step windows spent computing (not waiting for data or sync).",
    )
    cols[1].metric(
        "Rollout devices generating",
        charts.rate(totals["rollout_generating_share"]),
        help="Share of rollout device-seconds with a turn running.",
    )
    cols[2].metric(
        "Rollout device time never used",
        charts.device_seconds(totals["wasted_device_s"]),
        help="infra_error + aborted + unused rollouts' share of generating device-seconds.",
    )
    trainer = calls.call(filters.store, analyses.trainer_goodput, filters.run_id, steps=filters.steps)
    if not trainer.empty:
        st.plotly_chart(
            charts.bars(trainer, "step", TRAINER, "Trainer time per step", "train step", "seconds"),
            key="health-trainer",
        )
        st.caption(
            "What to look for: data wait is rollouts starving the trainer; sync wait is weight-sync "
            "bubbles (refits) the trainer sits through."
        )
    fleet = calls.call(filters.store, analyses.rollout_goodput, filters.run_id, steps=filters.steps)
    fleet = fleet[fleet["step"].notna()]
    if not fleet.empty:
        st.plotly_chart(
            charts.bars(fleet, "step", FLEET, "Rollout devices per step", "train step", "device-seconds"),
            key="health-fleet",
        )
        st.caption(
            "What to look for: waiting for weights is devices idle during a weight sync; waiting on "
            "tools is rollouts parked on sandboxes or scoring; idle is nothing to do."
        )
    lost = calls.analysis(analyses.wasted_devices, filters)
    lost[WASTED] = lost[WASTED].fillna(0.0)
    if not lost.empty:
        lost["step"] = lost["step"].astype("Int64").astype(str).replace("<NA>", "not consumed")
        st.plotly_chart(
            charts.bars(
                lost,
                "step",
                WASTED,
                "Device-seconds on rollouts never used",
                "consuming train step",
                "device-seconds",
            ),
            key="health-wasted",
        )
        st.caption(
            "What to look for: infra errors and aborts are fleet reliability; unused (no signal, "
            "stale, unscored) is what the funnel throws away."
        )


def alerts(filters: Filters) -> None:
    st.subheader("Alerts")
    try:
        events = calls.alert_events(filters)
    except StoreError as e:  # the rest of the page does not depend on it
        st.warning(f"**{e.title}**: {e}")
        return
    if events.empty:
        st.caption(
            f"No alert recorded for this run. `rollscope watch --store {filters.store} --run {filters.run_id} "
            "--notify URL` runs every check rule every minute, posts each change from PASS to FAIL and back to a "
            "webhook (Slack or any JSON receiver), and records it here."
        )
        return
    st.plotly_chart(charts.timeline(events), key="health-alerts")
    failing = events.groupby("rule")["state"].last().eq("FAIL").sum()
    st.caption(
        f"{charts.count(len(events))} changes recorded by `rollscope watch`; {charts.count(failing)} rules failing "
        "as of the latest. What to look for: a rule that flaps between FAIL and PASS sits on its threshold; a "
        "FAIL with no PASS after it is still going on. Delivered: whether the webhook took the alert."
    )
    shown = events.assign(time=events["time"].dt.strftime("%Y-%m-%d %H:%M:%S"))
    st.dataframe(shown.iloc[::-1], hide_index=True, width="stretch", key="health-alert-table")


def body(filters: Filters) -> None:
    alerts(filters)
    liveness(filters)
    scoring(filters)
    goodput(filters)


page_frame.live(
    body,
    page_frame.page(
        "Health",
        "The alerts `rollscope watch` sent, and is it stuck: rollouts in flight, silent processes, scoring "
        "latency, and where time waits.",
    ),
)
