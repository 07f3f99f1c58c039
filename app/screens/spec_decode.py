"""Speculative decoding: acceptance across policy versions, drafter drift and the log-prob lint."""

import streamlit as st

from rollscope.app import calls, charts, page_frame
from rollscope.app.filters import Filters
from rollscope.queries import analyses

MAX_DRIFT_WARNINGS = 3


def lint(filters: Filters) -> None:
    """The log-prob lint is an error of the run's setup, not a trend: red, at the top."""
    found = calls.analysis(analyses.logprob_lint, filters)
    if found.empty:
        return
    turns = calls.analysis(analyses.logprob_lint_summary, filters)["turns"]
    with st.container(border=True):
        st.markdown(
            f":red-background[:material/error: **Log-prob lint fails**] :red[{charts.count(turns)} "
            "turns recorded the *drafter's* log-probabilities for training: the importance ratios of those "
            "samples are wrong. Record the policy's (target model's) log-probabilities.]"
        )
        st.dataframe(found, hide_index=True)


def warnings(filters: Filters) -> None:
    """Drift of the drafter in service now is a warning; a drafter already replaced only a note."""
    drift = calls.analysis(analyses.spec_drift, filters)
    flagged = drift[drift["flagged"]].sort_values("drop_points", ascending=False)
    for row in flagged.head(MAX_DRIFT_WARNINGS).itertuples():
        fell = (
            f"acceptance fell from {charts.rate(row.baseline_acceptance)} to "
            f"{charts.rate(row.latest_acceptance)} ({charts.points(row.drop_points)}) between policy versions "
            f"{row.first_policy_version} and {row.last_policy_version}"
        )
        if row.current:
            st.warning(
                f"**Drafter {row.drafter_version} is drifting from the policy**: {fell}. Refresh or retrain it "
                "on recent rollouts.",
                icon=":material/warning:",
            )
        else:
            st.caption(
                f":material/history: Drafter {row.drafter_version} drifted before it was replaced ({fell}); "
                "nothing to do for it now."
            )
    if len(flagged) > MAX_DRIFT_WARNINGS:
        st.caption(
            f"… and {len(flagged) - MAX_DRIFT_WARNINGS} more drafter versions drifted (largest drops first)."
        )


def headline(filters: Filters) -> None:
    frame = calls.analysis(analyses.spec_decode, filters)
    if frame.empty or not frame["drafted"].fillna(0).sum():
        raise page_frame.NothingToShow(
            "No speculative decoding in this selection: no turn records drafted tokens (`rl.spec.draft_tokens`)."
        )
    row = frame.iloc[0]
    cols = st.columns(5)
    cols[0].metric("Acceptance rate α", charts.rate(row["acceptance_rate"]))
    cols[1].metric("Draft budget k (spec_k)", charts.count(row["k"]), help="Tokens drafted per verify step.")
    cols[2].metric(
        "Mean accepted length (tokens per verify step)", charts.number(row["mean_accepted_length"])
    )
    cols[3].metric(
        "Expected tokens per verify step",
        charts.number(row["expected_tokens_per_step"]),
        help="(1 − α^(k+1)) / (1 − α): what α and k promise.",
    )
    cols[4].metric(
        "Effective speed-up",
        f"{charts.number(row['effective_speedup'])} ×",
        help="(accepted + verify steps) / verify steps: tokens per target-model step against 1 without a "
        "drafter (the drafter's own cost not counted).",
    )


def by_policy_version(filters: Filters) -> None:
    frame = calls.analysis(analyses.spec_decode, filters, by="policy_version")
    fig = charts.lines(
        frame,
        "policy_version",
        ["acceptance_rate"],
        "Acceptance across policy versions",
        "policy version",
        "acceptance rate",
        percent=True,
    )
    drift = calls.analysis(analyses.spec_drift, filters).sort_values("first_policy_version").iloc[1:]
    charts.mark(
        fig, drift["first_policy_version"].tolist(), [f"drafter {v}" for v in drift["drafter_version"]]
    )
    st.plotly_chart(fig, key="spec-version")
    st.caption(
        "What to look for: acceptance sliding between drafter refreshes (dotted lines) as the policy "
        "moves away from the drafter."
    )
    st.plotly_chart(
        charts.lines(
            frame,
            "policy_version",
            ["mean_accepted_length"],
            "Accepted length across policy versions",
            "policy version",
            "tokens per verify step",
        ),
        key="spec-length",
    )


def by_refresh(filters: Filters) -> None:
    frame = calls.analysis(analyses.spec_decode, filters, by="versions_since_refresh")
    st.plotly_chart(
        charts.lines(
            frame,
            "versions_since_refresh",
            ["acceptance_rate"],
            "Acceptance by policy versions since the drafter's refresh",
            "versions since refresh",
            "acceptance rate",
            percent=True,
        ),
        key="spec-refresh",
    )
    st.caption(
        "What to look for: how fast acceptance decays; that is how often the drafter needs refreshing."
    )


def by_environment_and_length(filters: Filters) -> None:
    left, right = st.columns(2)
    with left:
        frame = calls.analysis(analyses.spec_decode, filters, by="environment")
        st.plotly_chart(
            charts.bars(
                frame,
                "environment",
                ["acceptance_rate"],
                "Acceptance per environment",
                "environment",
                "acceptance rate",
                percent=True,
            ),
            key="spec-env",
        )
    with right:
        frame = calls.analysis(analyses.spec_decode, filters, by="length_bucket")
        st.plotly_chart(
            charts.bars(
                frame,
                "length_bucket",
                ["acceptance_rate"],
                "Acceptance by generation length",
                "decoded tokens (bucket)",
                "acceptance rate",
                percent=True,
            ),
            key="spec-length-bucket",
        )
    st.caption(
        "What to look for: long generations with low acceptance, where a larger speculative budget "
        "(or a better drafter) would pay most."
    )


def body(filters: Filters) -> None:
    lint(filters)
    warnings(filters)
    headline(filters)
    by_policy_version(filters)
    by_refresh(filters)
    by_environment_and_length(filters)


page_frame.live(
    body,
    page_frame.page(
        "Speculative decoding",
        "How well the drafter matches the policy as training moves "
        "it, and whether training reads the right log-probabilities.",
    ),
)
