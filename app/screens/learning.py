"""Learning: is the policy improving and is training going wrong (the detectors, entropy, KL, lengths against their
limit), which groups carry no signal and why, and do trainer and engine agree."""

from functools import partial

import pandas as pd
import streamlit as st

from rollscope.app import calls, charts, page_frame, sidebar, threads
from rollscope.app.filters import Filters
from rollscope.queries import analyses
from rollscope.queries import report as queries_report
from rollscope.queries.analyses import DETECTORS, SUCCESS_THRESHOLD
from rollscope.queries.checks import THRESHOLDS, detector_parameters

STATUSES = ("always solved", "mixed", "never solved")  # task_solve_rates' curriculum statuses
KIND_COLORS = {
    "all_wrong_rollouts": "#dc2626",
    "all_right_rollouts": "#16a34a",
    "other_equal_rollouts": "#a855f7",
    "group_too_small_rollouts": "#94a3b8",
}
FLAGS = {  # transcript_flags' per-step counts, as the chart names them
    "truncated": "cut at the token limit",
    "answer_missing": "no readable final answer",
    "looping": "reply ending in a loop",
    "tool_error_rollouts": "a tool call failed",
}


def headline(figures: threads.Figures) -> None:
    run = analyses_record(figures["learning"])
    zero = figures["zero_signal_summary"]
    tasks = figures["task_solve_summary"]
    trainer = figures["trainer"]
    cols = st.columns(5)
    cols[0].metric("Mean reward", charts.number(run.get("reward_mean")), help="Over scored rollouts.")
    cols[1].metric(
        "Success rate",
        charts.rate(run.get("success_rate")),
        help=f"Share of scored rollouts with reward ≥ {SUCCESS_THRESHOLD:g} (learning.success_rate).",
    )
    cols[2].metric(
        "Latest train loss",
        charts.number(trainer["train_loss_last"], 4),
        help="rl.train.loss of the latest step that recorded one.",
    )
    cols[3].metric(
        "Tasks always solved",
        charts.count(tasks["tasks_always_solved"]),
        help=f"Of {tasks['tasks_attempted']:,} tasks attempted: every attempt succeeded (too easy, no signal).",
    )
    cols[4].metric(
        "Tasks never solved",
        charts.count(tasks["tasks_never_solved"]),
        help="Every attempt failed (too hard, no signal).",
    )
    st.caption(
        f"Groups with no signal: **{charts.count(zero['all_wrong']['groups'])}** all-wrong, "
        f"**{charts.count(zero['all_right']['groups'])}** all-right, "
        f"**{charts.count(zero['other_equal']['groups'])}** other-equal, "
        f"**{charts.count(zero['group_too_small']['groups'])}** too small."
    )


def analyses_record(frame) -> dict:
    return {} if frame.empty else frame.iloc[0].to_dict()


def detectors(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Is training going wrong")
    rows = []
    for rule in DETECTORS:
        v, episodes = figures[f"verdict:{rule}"], figures[f"episodes:{rule}"]
        latest = episodes.iloc[-1] if len(episodes) else None
        rows.append(
            {
                "rule": rule,
                "now": _now(v),
                "first fired at step": charts.count(v["first_step"]),
                "fired at steps": charts.count(v["steps_fired"]),
                "latest stretch": "—" if latest is None else f"steps {latest.first_step}–{latest.last_step}",
                "where": "—" if latest is None else (latest.environment or "all environments"),
                "example rollouts": None if latest is None else _rollouts_of(filters, latest),
            }
        )
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        key="detectors",
        placeholder="—",  # a rule that never fired has no rollouts to link to, like its other empty cells
        column_config={
            "example rollouts": st.column_config.LinkColumn(display_text="rollouts of those steps"),
        },
    )
    st.caption(
        'The `rollscope check` rules that watch training itself (docs/metrics.md, "Detectors"), over the whole '
        "run; each stretch of steps a rule fired at is shaded on the chart of the figure it watches, and links "
        "to the rollouts of those steps. What to look for: a rule firing now (`rollscope watch` posts it to a "
        "webhook as it starts and stops)."
    )


def _now(verdict: dict) -> str:
    if not verdict["steps_judged"]:
        return "nothing to judge yet"
    return "FIRING" if verdict["firing"] else "passing"


def _rollouts_of(filters: Filters, stretch) -> str:
    return sidebar.link(
        "rollouts", filters.run_id, (stretch.first_step, stretch.last_step), stretch.environment
    )


def _shade(fig, figures: threads.Figures, filters: Filters, *rules: str):
    """Shade the steps each of ``rules`` fired at that lie in the page's step range."""
    lo, hi = filters.steps or (None, None)
    for rule in rules:
        episodes = figures[f"episodes:{rule}"]
        if lo is not None:
            episodes = episodes[(episodes["last_step"] >= lo) & (episodes["first_step"] <= hi)]
        charts.firing(fig, episodes, rule)
    return fig


def signals(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Entropy and KL")
    steps = figures["trainer_steps"]
    entropy = steps[steps["train_entropy"].notna()]
    if entropy.empty:
        st.caption(
            "The trainer logs no entropy (rl.train.entropy; TRL's `entropy`, verl's `actor/entropy` are read as it)."
        )
    else:
        fig = charts.per_step(
            entropy, ["train_entropy"], "Policy entropy per step", "entropy (nats per token)"
        )
        st.plotly_chart(_shade(fig, figures, filters, "entropy-collapse"), key="entropy")
        st.caption(
            "What to look for: a slow fall is the policy growing confident; a collapse (shaded: the "
            "entropy-collapse rule) ends exploration, and groups soon answer alike."
        )
    kl = [c for c in ("train_kl", "train_policy_kl") if steps[c].notna().any()]
    if not kl:
        st.caption("The trainer logs no KL (rl.train.kl: TRL's `kl`, verl's `actor/kl_loss`).")
        return
    names = {"train_kl": "KL to the reference", "train_policy_kl": "the update's KL (policy_kl)"}
    fig = charts.per_step(steps, kl, "KL per step", "KL (nats per token)", names=[names[c] for c in kl])
    st.plotly_chart(_shade(fig, figures, filters, "kl-acceleration"), key="kl")
    st.caption(
        "What to look for: the KL to the reference rising steadily is the policy moving; rising faster and "
        "faster (shaded: kl-acceleration) is the classic onset of reward hacking."
    )


def lengths(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Response length against its limit")
    frame = figures["generations_by_step"]
    if frame.empty:
        st.info("No consumed rollout with turns in this selection yet.")
        return
    ys = ["mean_output_tokens", "longest_response"]
    fig = charts.lines(
        frame,
        "step",
        ys,
        "Decoded tokens per step, and the response limit",
        "train step",
        "tokens",
        names=["mean decoded tokens per rollout", "longest single response"],
    )
    if frame["max_tokens"].notna().any():
        xs, limit = charts.thinned(frame["step"], frame["max_tokens"])
        fig.add_scatter(
            x=xs, y=limit, mode="lines", name="largest response limit (max_tokens)", line={"dash": "dash"}
        )
    st.plotly_chart(_shade(fig, figures, filters, "length-drift", "length-limit"), key="lengths")
    st.caption(
        "What to look for: the longest response pinned at the dashed limit while the mean climbs towards it "
        "(shaded: length-limit) — the cut-off samples teach the limit, not the task; a fast swing of the mean "
        "either way (shaded: length-drift)."
    )
    cuts = ["response_cut_share", "context_cut_share", "turns_cut_share", "tools_cut_share"]
    st.plotly_chart(
        charts.lines(
            frame,
            "step",
            cuts,
            "Rollouts cut off per step, by the limit that cut them",
            "train step",
            "share of the step's rollouts",
            percent=True,
            names=["response limit", "context length", "turn budget", "tool budget"],
        ),
        key="cut-off",
    )
    st.caption(
        "Each rollout counts against the limit that applied to it (its own turn or tool budget, else the token "
        "limit its last turn hit), never against the batch's longest sample. What to look for: the context "
        "length cutting off multi-turn rollouts whose responses never reach max_tokens."
    )


def rewards(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Reward and success per step")
    by_step = figures["learning_by_step"]
    if by_step.empty:
        st.info("No scored rollouts consumed by a train step in this selection yet.")
        return
    fig = charts.per_step(
        by_step, ["reward_mean"], "Reward per step", "reward (score)", names=["mean reward"]
    )
    for column, name in (("reward_p10", "p10"), ("reward_p50", "median"), ("reward_p90", "p90")):
        xs, values = charts.thinned(by_step["step"], by_step[column])
        fig.add_scatter(
            x=xs,
            y=values,
            name=name,
            mode="lines",
            line={"width": 1, "dash": "dot"},
        )
    st.plotly_chart(_shade(fig, figures, filters, "reward-divergence", "reward-dominance"), key="reward")
    st.caption(
        f"Pale: each step's mean; dark: the mean of the last {charts.ROLLING_STEPS} steps; dotted: p10, median, p90 "
        "(with 0/1 rewards they sit at 0 or 1). What to look for: a rising mean; p90 at the top while p10 stays "
        "at 0 is learning on the easy tasks only; a flat mean for many steps, a policy that stopped improving."
    )
    st.plotly_chart(
        charts.per_step(
            by_step,
            ["success_rate"],
            "Success rate per step",
            "share of scored rollouts succeeding",
            percent=True,
        ),
        key="success",
    )
    st.caption(
        f"Pale: each step; dark: the mean of the last {charts.ROLLING_STEPS} steps. What to look for: a rising mean; "
        "near 100 % the tasks are too easy and groups stop carrying signal."
    )
    per_env = figures["learning_by_step_environment"]
    wide = per_env.pivot(
        index="step", columns="environment", values=["success_rate", "success_rate_rolling_mean"]
    )
    wide.columns = [env if value == "success_rate" else f"{env}_rolling_mean" for value, env in wide.columns]
    envs = sorted(per_env["environment"].unique())
    st.plotly_chart(
        charts.per_step(
            wide.reset_index(),
            envs,
            "Success rate per step, by environment",
            "share of scored rollouts succeeding",
            percent=True,
        ),
        key="success-env",
    )
    st.caption("What to look for: one environment saturating (or stuck at 0) while the others still move.")


def loss(figures: threads.Figures) -> None:
    steps = figures["trainer_steps"]
    steps = steps[steps["train_loss"].notna()]
    if steps.empty:
        st.caption("The trainer records no rl.train.loss.")
        return
    st.plotly_chart(
        charts.per_step(
            steps,
            ["train_loss"],
            "Train loss per step",
            "loss (as the trainer reports it)",
        ),
        key="loss",
    )
    st.caption(
        "What to look for: a policy-gradient loss is noisy and need not fall; a jump that stays, together with "
        "a reward drop, is an instability."
    )


def zero_signal(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Why groups carry no signal")
    by_step = figures["zero_signal_by_step"]
    if by_step.empty:
        st.info("No rollout lost at the nonzero-signal stage in this selection.")
        return
    kinds = list(KIND_COLORS)
    fig = charts.bars(
        by_step,
        "step",
        kinds,
        "Rollouts with no signal per step, by why",
        "train step",
        "rollouts",
        colors=KIND_COLORS,
    )
    st.plotly_chart(_shade(fig, figures, filters, "group-collapse"), key="zero-signal")
    st.caption(
        "All-wrong: every attempt failed (too hard); all-right: every attempt succeeded (too easy); other-equal: "
        "equal partial scores. What to look for: all-right growing as the policy learns means the curriculum "
        "needs harder tasks; all-wrong dominating, easier ones."
    )
    by_env = figures["zero_signal_by_environment"]
    st.dataframe(
        by_env[["environment", *[k.replace("_rollouts", "_groups") for k in kinds], "zero_signal_rollouts"]],
        hide_index=True,
    )


def tasks(figures: threads.Figures) -> None:
    st.subheader("Per-task solve rates")
    frame = figures["task_solve_rates"]
    if frame.empty:
        st.info("No scored attempts in this selection yet.")
        return
    summary = figures["task_solve_summary"]
    counts = pd.DataFrame(
        [(status, summary[f"tasks_{status.replace(' ', '_')}"]) for status in STATUSES],
        columns=["status", "tasks"],
    ).query("tasks > 0")
    st.plotly_chart(
        charts.bars(counts, "status", ["tasks"], "Tasks by solve status", "status", "tasks"),
        key="task-status",
    )
    st.caption(
        "What to look for: many always-solved or never-solved tasks are compute spent on groups with no signal: "
        "drop them, or move them to a later (or earlier) curriculum stage."
    )
    cols = st.columns(2)
    for col, status in zip(cols, ("always solved", "never solved"), strict=True):
        chosen = frame[frame["status"] == status]
        col.markdown(f"**{status.capitalize()}** ({len(chosen)} tasks)")
        col.dataframe(chosen[["task", "attempts", "first_step", "last_step"]], hide_index=True, height=220)
    with st.expander("Every task"):
        st.dataframe(frame, hide_index=True)


def mismatch(figures: threads.Figures, filters: Filters) -> None:
    st.subheader("Train-inference mismatch")
    by_step = figures["mismatch_by_step"]
    if by_step.empty:
        st.info(
            "No sample records a train-inference mismatch (rl.sample.mismatch_kl and related attributes, "
            "docs/semconv.md)."
        )
        return
    fig = charts.lines(
        by_step,
        "step",
        ["mismatch_kl_mean"],
        "Train-inference KL per step",
        "train step",
        "KL per token (nats)",
        names=["mean KL of the step's samples"],
    )
    limit = THRESHOLDS["mismatch-kl"]
    fig.add_hline(y=limit, line_dash="dash", line_color="#ef4444", annotation_text=f"check: {limit:g}")
    st.plotly_chart(_shade(fig, figures, filters, "mismatch-rising"), key="mismatch")
    st.caption(
        "What to look for: a step above the dashed line (the mismatch-kl check) means the engine's log-probs "
        "and the trainer's disagree: a kernel, precision or weight-sync problem, not learning."
    )


def transcript_flags(figures: threads.Figures) -> None:
    st.subheader("What the transcripts show")
    by_step = figures["transcript_flags_by_step"]
    if by_step.empty:
        st.info(
            "No consumed rollout has a transcript in this selection (content capture off, or nothing consumed "
            'yet; docs/store.md, "Transcripts").'
        )
        return
    st.plotly_chart(
        charts.lines(
            by_step,
            "step",
            list(FLAGS),
            "Rollouts flagged by their transcripts, per step",
            "train step",
            "rollouts (of those with a transcript)",
            names=list(FLAGS.values()),
        ),
        key="transcript-flags",
    )
    run = analyses_record(figures["transcript_flags"])
    st.caption(
        f"Of **{charts.count(run.get('rollouts'))}** consumed rollouts with a transcript: "
        f"**{charts.count(run.get('truncated'))}** cut at the token limit, "
        f"**{charts.count(run.get('answer_missing'))}** without a readable answer, "
        f"**{charts.count(run.get('looping'))}** looping, **{charts.count(run.get('tool_error_rollouts'))}** "
        f"with a failed tool call ({charts.count(run.get('tool_errors'))} calls). What to look for: cut-off "
        "replies rising with the mean length (the policy is outgrowing its limit, and a cut-off answer scores 0); "
        "loops rising with them (a degenerate policy); missing answers rising while rewards fall (a format the "
        "verifier cannot read, not a wrong answer); tool errors rising (a broken sandbox or tool, not the policy). "
        'Definitions: docs/metrics.md, "Transcript flags".'
    )


def body(filters: Filters) -> None:
    # Every figure of the page asked for at once; each section is drawn when its own are ready (threads.at_once).
    analysis = partial(calls.analysis, filters=filters)
    trainer = partial(calls.call, filters.store, run_id=filters.run_id, steps=filters.steps)
    figures = threads.at_once(
        {
            "learning": partial(analysis, analyses.learning),
            "zero_signal_summary": partial(analysis, analyses.zero_signal_summary),
            "task_solve_summary": partial(analysis, analyses.task_solve_summary),
            "trainer": partial(trainer, analyses.trainer),
            "learning_by_step": partial(
                analysis, analyses.learning, by="step", rolling=("reward_mean", "success_rate")
            ),
            "learning_by_step_environment": partial(
                analysis,
                analyses.learning,
                by="step_environment",
                rolling=("success_rate",),
                percentiles=False,
            ),
            "trainer_steps": partial(
                trainer,
                analyses.trainer_steps,
                rolling=("train_loss", "train_entropy", "train_kl", "train_policy_kl"),
            ),
            "generations_by_step": partial(analysis, analyses.generations_by_step),
            **{  # each rule on its own thread; its verdict and stretches read its rows, computed once
                f"verdict:{rule}": partial(
                    calls.call, filters.store, queries_report.detector_verdict, filters.run_id, rule
                )
                for rule in DETECTORS
            },
            **{
                f"episodes:{rule}": partial(
                    calls.call,
                    filters.store,
                    analyses.detector_episodes,
                    filters.run_id,
                    rule,
                    **detector_parameters(rule),
                )
                for rule in DETECTORS
            },
            "zero_signal_by_step": partial(analysis, analyses.zero_signal, by="step"),
            "zero_signal_by_environment": partial(analysis, analyses.zero_signal, by="environment"),
            "task_solve_rates": partial(analysis, analyses.task_solve_rates),
            "mismatch_by_step": partial(analysis, analyses.mismatch, by="step"),
            "transcript_flags": partial(analysis, analyses.transcript_flags),
            "transcript_flags_by_step": partial(analysis, analyses.transcript_flags, by="step"),
        }
    )
    headline(figures)
    detectors(figures, filters)
    rewards(figures, filters)
    signals(figures, filters)
    lengths(figures, filters)
    loss(figures)
    zero_signal(figures, filters)
    tasks(figures)
    mismatch(figures, filters)
    transcript_flags(figures)


page_frame.live(
    body,
    page_frame.page(
        "Learning",
        "Is the policy improving, and is training going wrong: reward, success, entropy, KL, lengths against "
        "their limit and loss per step, with the detectors' firing steps shaded; which groups carry no signal and "
        "why; tasks too easy or too hard; whether the trainer's log-probabilities match the engine's.",
    ),
)
