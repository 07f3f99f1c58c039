"""Speculative decoding: acceptance across policy versions, drafter drift and the log-prob lint."""

import streamlit as st

from rollscope.app import charts, data

MAX_DRIFT_WARNINGS = 3


def warnings(filters: data.Filters) -> None:
    drift = data.analysis("spec_drift", filters)
    flagged = drift[drift["flagged"]].sort_values("drop_points", ascending=False)
    for row in flagged.head(MAX_DRIFT_WARNINGS).itertuples():
        st.warning(
            f"**Drafter {row.drafter_version} is drifting from the policy**: acceptance fell from "
            f"{charts.rate(row.baseline_acceptance)} to {charts.rate(row.latest_acceptance)} "
            f"({row.drop_points:.1f} points) between policy versions {row.first_policy_version} and "
            f"{row.last_policy_version}. Refresh or retrain it on recent rollouts.",
            icon=":material/warning:",
        )
    if len(flagged) > MAX_DRIFT_WARNINGS:
        st.caption(
            f"… and {len(flagged) - MAX_DRIFT_WARNINGS} more drafter versions drifted (largest drops first)."
        )
    lint = data.analysis("logprob_lint", filters)
    if not lint.empty:
        st.warning(
            f"**Log-prob lint**: {charts.count(lint['turns'].sum())} turns recorded the *drafter's* "
            "log-probabilities for training; the importance ratios of those samples are wrong.",
            icon=":material/report:",
        )
        st.dataframe(lint, hide_index=True)


def headline(filters: data.Filters) -> None:
    frame = data.analysis("spec_decode", filters)
    if frame.empty or not frame["drafted"].fillna(0).sum():
        raise data.NothingToShow(
            "No speculative decoding in this selection: no turn records drafted tokens (`rl.spec.draft_tokens`)."
        )
    row = frame.iloc[0]
    cols = st.columns(3)
    cols[0].metric("Acceptance rate α", charts.rate(row["acceptance_rate"]))
    cols[1].metric(
        "Mean accepted length (tokens per verify step)", charts.number(row["mean_accepted_length"])
    )
    cols[2].metric("Expected tokens per verify step", charts.number(row["expected_tokens_per_step"]))


def by_policy_version(filters: data.Filters) -> None:
    frame = data.analysis("spec_decode", filters, by="policy_version")
    fig = charts.lines(
        frame,
        "policy_version",
        ["acceptance_rate"],
        "Acceptance across policy versions",
        "policy version",
        "acceptance rate",
        percent=True,
    )
    drift = data.analysis("spec_drift", filters).sort_values("first_policy_version").iloc[1:]
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


def by_refresh(filters: data.Filters) -> None:
    frame = data.analysis("spec_decode", filters, by="versions_since_refresh")
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


def by_environment_and_length(filters: data.Filters) -> None:
    left, right = st.columns(2)
    with left:
        frame = data.analysis("spec_decode", filters, by="environment")
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
        frame = data.analysis("spec_decode", filters, by="length_bucket")
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


def body(filters: data.Filters) -> None:
    warnings(filters)
    headline(filters)
    by_policy_version(filters)
    by_refresh(filters)
    by_environment_and_length(filters)


data.live(
    body,
    data.page(
        "Speculative decoding",
        "How well the drafter matches the policy as training moves "
        "it, and whether training reads the right log-probabilities.",
    ),
)
