"""Rollouts: find rollouts (by id, outcome or the text of their transcripts), and open one: what the agent said
and did turn by turn beside each turn's accounting, its group's attempts side by side, its task's attempts across
training, and its spans as a waterfall."""

from functools import partial

import pandas as pd
import streamlit as st

from rollscope.app import calls, charts, conversation, links, page_frame, threads
from rollscope.app.conversation import readable
from rollscope.app.filters import Filters
from rollscope.app.links import code, viewer
from rollscope.errors import RollscopeError
from rollscope.queries import analyses, examples, transcripts
from rollscope.queries import trace as trace_queries
from rollscope.queries.trace import SEARCH_LIMIT
from rollscope.semconv import FUNNEL_RATES, ROLLOUT_OK, ROLLOUT_STATUSES

STATUSES = [None, *ROLLOUT_STATUSES]
# the stage a rollout was lost at
STAGES = [None, "usable", *(stage for stage in FUNNEL_RATES if stage != "usable")]
FINISH_REASONS = [None, "stop", "length", "tool_calls", "content_filter"]
VIEWS = ["Conversation", "Group", "Task history", "Timeline"]
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
HIT_COLUMNS = {
    "rollout_id": None,
    "environment": None,
    "step": charts.count,
    "rollout_status": None,
    "reward": charts.number,
    "stage": None,
    "lost_reason": None,
    "hits": charts.count,
    "role": None,
    "snippet": None,
}
LINKED = {  # the page's address parameters (a link from another page) and the filter each sets
    "rollout-stage": "stage",
    "rollout-reason": "reason",
    "transcript-text": "q",
    "transcript-finish": "finish",
}


def from_link() -> None:
    """A link's filters (``?stage=nonzero_signal&reason=all-equal group``, ``?q=Traceback``) set the search's
    widgets when the page opens; the user's choices win after that."""
    for key, param in LINKED.items():
        if key not in st.session_state and st.query_params.get(param):
            st.session_state[key] = st.query_params[param]
    if "transcript-regex" not in st.session_state and st.query_params.get("regex") == "1":
        st.session_state["transcript-regex"] = True


def search(filters: Filters):
    """The rollouts the filters find: by id, status, reward and funnel stage, or by their transcripts' text."""
    cols = st.columns([3, 2, 1, 1])
    text = cols[0].text_input("Rollout or task id contains", key="rollout-text")
    status = cols[1].selectbox(
        "Status", STATUSES, key="rollout-status", format_func=lambda s: "any status" if s is None else s
    )
    low = cols[2].number_input("Reward ≥", value=None, key="rollout-reward-min")
    high = cols[3].number_input("Reward ≤", value=None, key="rollout-reward-max")
    cols = st.columns([3, 1, 2, 2, 2])
    pattern = cols[0].text_input(
        "Text in transcripts",
        key="transcript-text",
        help="Case-insensitive; a regular expression (RE2) with regex",
    )
    regex = cols[1].toggle("regex", key="transcript-regex")
    stage = cols[2].selectbox(
        "Stage lost at", STAGES, key="rollout-stage", format_func=lambda s: "any stage" if s is None else s
    )
    reason = cols[3].selectbox("Why lost", _reasons(filters, stage), key="rollout-reason", format_func=_any)
    finish = cols[4].selectbox("Finish reason", FINISH_REASONS, key="transcript-finish", format_func=_any)
    wanted = {
        "text": text or None,
        "status": status,
        "reward": None if low is None and high is None else (low, high),
        "lost_at": stage,
        "lost_reason": reason,
    }
    if pattern or finish:
        return hits(filters, pattern, regex, finish, wanted)
    found = calls.rollouts(filters, **wanted)
    st.caption(
        f"{charts.count(len(found))} rollouts (newest first, at most {SEARCH_LIMIT}); the sidebar's "
        "environment and step range apply."
    )
    shown = readable(found, COLUMNS).assign(open=[viewer(filters.run_id, r) for r in found["rollout_id"]])
    st.dataframe(shown, hide_index=True, height=240, width="stretch", key="found", column_config=OPEN)
    return found


OPEN = {"open": st.column_config.LinkColumn("open", display_text="open", width="small")}


def _any(value) -> str:
    return "any" if value is None else value


def _reasons(filters: Filters, stage) -> list:
    """The reasons the funnel lost rollouts for at ``stage`` in this selection (and a link's, if another)."""
    if stage in (None, "usable"):
        return [None]
    losses = calls.analysis(analyses.funnel_losses, filters)
    reasons = losses.loc[losses["stage"] == stage, "reason"].tolist()
    linked = st.session_state.get("rollout-reason")
    return [None, *reasons, *([linked] if linked and linked not in reasons else [])]


def hits(filters: Filters, pattern: str, regex: bool, finish, wanted: dict):
    try:
        found = calls.call(
            filters.store,
            transcripts.search,
            filters.run_id,
            pattern or None,
            regex=regex,
            finish_reason=finish,
            environment=filters.environment,
            steps=filters.steps,
            **wanted,
        )
    except RollscopeError as e:  # a regular expression that does not parse: say so, keep the page
        page_frame.show_error(e)
        return pd.DataFrame({"rollout_id": []})
    st.caption(
        f"{charts.count(len(found))} rollouts whose transcripts match (newest first, at most "
        f"{transcripts.SEARCH_LIMIT}), with their first match; the sidebar's environment and step range apply. "
        "`rollscope sql` searches the `messages` view the same way (docs/transcripts.md)."
    )
    shown = readable(found, HIT_COLUMNS).assign(open=[viewer(filters.run_id, r) for r in found["rollout_id"]])
    st.dataframe(shown, hide_index=True, height=240, width="stretch", key="hits", column_config=OPEN)
    return found


EXAMPLE_COLUMNS = {
    "rollout_id": None,
    "environment": None,
    "step": charts.count,
    "reward": charts.number,
    "lost_at": None,
    "lost_reason": None,
    "value": lambda v: charts.count(v) if not charts.missing(v) and abs(v) >= 100 else charts.number(v, 3),
}


def listed(filters: Filters, key: str):
    """The rollouts a check or lever rests on (``?examples=check:nonzero-signal``), as its link promised."""
    selection = examples.named(key)
    if selection is None:
        st.warning(
            f"No such selection of rollouts: {code(key)}. [Search all rollouts]({links.rollouts(filters.run_id)})"
        )
        return []
    found = calls.examples(filters, selection, limit=examples.LIST_LIMIT)
    st.markdown(
        f"**{examples.count_line(found, selection).capitalize()}** (as the link named them; the "
        f"sidebar's filters apply). [Search all rollouts instead]({links.rollouts(filters.run_id)})"
    )
    shown = readable(found, EXAMPLE_COLUMNS).rename(
        columns={"value": examples.VALUES.get(selection.kind, "value")}
    )
    shown["open"] = [viewer(filters.run_id, r) for r in found["rollout_id"]]
    st.dataframe(shown, hide_index=True, height=240, width="stretch", key="listed", column_config=OPEN)
    return found["rollout_id"].tolist()


def outcome(rollout: dict, stage: dict, scores) -> None:
    st.markdown(
        f"Environment {code(rollout['environment'] or '—')} · task {code(rollout['task_id'])} · group "
        f"{code(rollout['group_id'])}"
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
            f"**{rollout['sample_decision']}**, staleness {charts.counted(rollout['sample_staleness'], 'version')}."
        )
    funnel(stage)
    if not scores.empty:
        st.markdown("Scores: " + " · ".join(score(row) for row in scores.to_dict("records")))


def score(row: dict) -> str:
    """One reward function's or judge's score, its name (the job's) as a code span: `unit_tests` **1.00**."""
    status = "" if row["status"] == ROLLOUT_OK else f" ({code(row['status'])})"
    return f"{code(row['name'])} **{charts.number(row['reward'])}**{status} in {charts.seconds(row['duration_s'])}"


def funnel(stage: dict) -> None:
    if not stage:
        st.caption("Funnel stage: not known yet (its rl.rollout span has not been taken in).")
    elif stage["usable"]:
        st.markdown("Funnel: **usable**: it reached the trainer and counted.")
    else:
        st.warning(
            f"Funnel: lost at **{charts.label(stage['lost_at'])}**, because: **{stage['lost_reason']}** "
            "(docs/metrics.md, the funnel)."
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


def group(filters: Filters, rollout_id: str, attempts) -> None:
    if attempts.empty:
        st.caption("This rollout records no group_id: no sibling attempts to compare its reward with.")
        return
    st.markdown(f"**Its group: {len(attempts)} attempts** (this rollout marked ▶)")
    shown = readable(attempts, GROUP_COLUMNS)
    shown.insert(0, "", ["▶" if this else "" for this in attempts["this_rollout"]])
    shown["open"] = [viewer(filters.run_id, r) for r in attempts["rollout_id"]]
    st.dataframe(shown, hide_index=True, width="stretch", key="group", column_config=OPEN)
    st.caption(
        "advantage = reward − the group's mean reward; advantage z = that over the rewards' standard deviation "
        "(— when all rewards are equal: the group gives no signal). What to look for: what the best attempt did "
        "that the worst did not."
    )
    frames = calls.call(
        filters.store,
        transcripts.group_conversations,
        filters.run_id,
        rollout_id,
        calls.window(filters, rollout_id),
    )
    conversation.side_by_side(attempts, frames)
    conversation.diff(attempts, frames)


def timeline(spans, marks) -> None:
    st.plotly_chart(charts.waterfall(spans, marks), key="waterfall")
    st.caption(
        "What to look for: gaps between turns (tool or queue waits), a judge or reward long after the "
        "last turn, and how long the rollout waited before a train step consumed it. ⟲ marks a turn that "
        "prefilled its history again (and why), ✂ one that starts from a compacted context."
    )
    continuity(marks)
    with st.expander("Spans"):
        st.dataframe(spans, hide_index=True, width="stretch")


def trace(filters: Filters, rollout_id: str) -> None:
    """The rollout's outcome, then the view chosen: each view reads only what it shows, in the rollout's
    time window."""
    bounds, store, run = calls.window(filters, rollout_id), filters.store, filters.run_id
    # The view drawn below (the widget's value is the session's), asked for together with the outcome.
    shown = st.session_state.get("rollout-view") or VIEWS[0]
    figures = threads.at_once(
        {
            "rollout": partial(calls.call, store, trace_queries.rollout, run, rollout_id, bounds),
            "stage": partial(calls.call, store, transcripts.stage, run, rollout_id),
            "scores": partial(calls.call, store, transcripts.scores, run, rollout_id, bounds),
            **(
                {
                    "conversation": partial(
                        calls.call, store, transcripts.conversation, run, rollout_id, bounds
                    ),
                    "marks": partial(calls.continuity, filters, rollout_id),
                }
                if shown == "Conversation"
                else {}
            ),
        }
    )
    rollout = figures["rollout"]
    if rollout is None:
        st.warning(f"Rollout {code(rollout_id)} is not in run {code(filters.run_id)}.")
        return
    outcome(rollout, figures["stage"], figures["scores"])
    view = st.segmented_control("View", VIEWS, default=VIEWS[0], key="rollout-view", required=True)
    if view == "Conversation":  # ``shown`` above
        conversation.conversation(filters, rollout_id, figures["conversation"], marks=figures["marks"])
    elif view == "Group":
        group(filters, rollout_id, calls.call(store, trace_queries.group, run, rollout_id, bounds))
    elif view == "Task history":
        found = (
            calls.call(store, transcripts.history, run, rollout["task_id"]) if rollout["task_id"] else None
        )
        conversation.history(run, rollout_id, found)
    else:
        timeline(
            calls.call(store, trace_queries.spans, run, rollout_id, bounds),
            calls.continuity(filters, rollout_id),
        )


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


def body(filters: Filters) -> None:
    from_link()
    linked = st.query_params.get("rollout")
    selection = st.query_params.get("examples")
    # Searched only while open: a page opened from a link to a rollout does not wait for a search nobody looks
    # at. The page itself writes the rollout it shows into the URL (to share it): that is not a link.
    arrived = linked is not None and linked != st.session_state.get("rollout-shown")
    finder = st.expander("Find rollouts", expanded=not arrived, key="find-rollouts", on_change="rerun")
    options = []
    if finder.open:
        with finder:
            options = listed(filters, selection) if selection else search(filters)["rollout_id"].tolist()
    if linked and linked not in options:
        options.insert(0, linked)
    if not options:
        st.info("No rollout matches these filters.")
        return
    st.subheader("One rollout")
    if linked and st.session_state.get("open-rollout") not in options:
        st.session_state["open-rollout"] = linked
    rollout_id = st.selectbox("Open rollout", options, key="open-rollout")
    st.query_params["rollout"] = rollout_id
    st.session_state["rollout-shown"] = rollout_id
    trace(filters, rollout_id)


page_frame.live(
    body,
    page_frame.page(
        "Rollouts",
        "Search the run's rollouts, by outcome or by what their transcripts say, and open one: what the agent "
        "said and did turn by turn beside each turn's tokens and time, its group's attempts side by side, its "
        "task's attempts across training, and its spans on one time axis.",
    ),
)
