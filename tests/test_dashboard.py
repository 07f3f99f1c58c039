"""The dashboard as a user sees it (Streamlit's AppTest): every page runs on a real store, every figure it shows
is what ``queries`` computes for the same run and filters, and empty or wrong stores get a message, never a
traceback."""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.fixtures.app_test import app_test
from benchmarks.fixtures.seeded_runs import RunWriter
from rollscope import formats, semconv
from rollscope.app import charts, comparison, explorer, links, readers, sidebar
from rollscope.app import pages as app_pages
from rollscope.queries import analyses, examples, trace
from rollscope.queries.checks import run_checks
from rollscope.queries.reader import Reader
from rollscope.queries.report import report
from rollscope.store import layout
from tests.conftest import ROOT

pytest_plugins = ("tests.test_dashboard_fixtures",)  # sample_store, empty_store
APP = Path(__file__).resolve().parent.parent / "app" / "dashboard.py"
PAGES = app_pages.TITLES  # slug -> title, from the one page list
RUN = "exp-7"


def open_page(store: Path, page: str = "overview", run: str | None = RUN, **state) -> AppTest:
    """The dashboard opened on ``store`` (as ``--store``), at ``?run=``, on one page."""
    at = app_test(APP, 60)
    at.session_state["store"] = str(store)
    for key, value in state.items():
        at.session_state[key] = value
    if run is not None:
        at.query_params["run"] = run
    at.run()
    if page != "overview":
        at.switch_page(f"screens/{page}.py").run()
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def figure(at: AppTest, key: str) -> dict:
    """The plotly figure drawn with ``key``, as the JSON the browser receives, its typed arrays read as plotly.js
    reads them (``plain``)."""
    found = [el for el in at.get("plotly_chart") if el.proto.id.endswith(f"-{key}")]
    assert len(found) == 1, f"no figure {key!r}"
    return plain(json.loads(found[0].proto.spec))


def plain(value):
    """Plotly's typed arrays (``{"dtype", "bdata"}``: a line's NumPy values, base64, little-endian) as lists, NaN
    as None (a list's missing value in the JSON), at any depth."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) >= {"dtype", "bdata"}:
        array = np.frombuffer(base64.b64decode(value["bdata"]), np.dtype(value["dtype"]).newbyteorder("<"))
        return [None if isinstance(v, float) and math.isnan(v) else v for v in array.tolist()]
    return {k: plain(v) for k, v in value.items()}


def same_cell(a: str, b: str) -> bool:
    try:
        return float(a.replace(",", "")) == pytest.approx(float(b.replace(",", "")), rel=5e-3, abs=0.5)
    except ValueError:
        return a == b


def traces(fig: dict) -> dict[str, dict]:
    return {t.get("name"): t for t in fig["data"]}


@pytest.fixture(scope="module")
def con(sample_store):
    """The expected figures come from a separate, plain reader of the same store."""
    return Reader(sample_store).con


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_sample_run(sample_store, page):
    at = open_page(sample_store, page)
    assert_clean(at)
    assert at.title[0].value == PAGES[page]
    assert at.caption[0].value  # the page says what it is for


@pytest.mark.skipif(not layout.run_ids(sidebar.SAMPLE_STORE), reason="sample_data/ holds no run yet")
@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_shipped_sample(page):
    at = open_page(sidebar.SAMPLE_STORE, page, run=None)  # what `rollscope dashboard` opens by default
    assert_clean(at)
    if page == "overview":
        run = layout.run_ids(sidebar.SAMPLE_STORE)[-1]
        expected = report(Reader(sidebar.SAMPLE_STORE).con, run)["funnel"]["dispatched"]
        assert metrics(at)["Rollouts dispatched"] == charts.count(expected)


def test_overview_shows_the_report_the_checks_and_the_trends(sample_store, con):
    at = open_page(sample_store)
    expected = report(con, RUN)
    funnel = expected["funnel"]
    shown = metrics(at)
    (label,) = [name for name in shown if name.startswith("Accelerator time, ")]
    unit, value = label.removeprefix("Accelerator time, "), shown.pop(label)
    seconds = float(value.replace(",", "")) * {"device-s": 1, "device-h": 3600}[unit]
    assert seconds == pytest.approx(expected["compute"]["device_seconds"]["total"], rel=5e-3)  # (see Compare)
    assert shown == {
        "Rollouts dispatched": charts.count(funnel["dispatched"]),
        "Usable rollouts": charts.count(funnel["usable"]),
        "Usable rate": charts.rate(funnel["rates"]["usable"]),
        "Wasted compute": charts.rate(expected["compute"]["wasted_compute_share"]),
        "New prefill : decode": charts.ratio(expected["prefill_decode"]["ratio"]),
        "Spec-decode acceptance": charts.rate(expected["spec_decode"]["acceptance_rate"]),
        "Trainer idle": charts.rate(expected["trainer"]["idle_fraction"]),
    }
    assert metrics(at)["Rollouts dispatched"] == "80"
    assert f"= **{funnel['usable']}** usable" in at.markdown[0].value
    results = run_checks(con, RUN)
    failing, passing = [r for r in results if not r.ok], [r for r in results if r.ok]
    # failing checks first, in red, with the full message and the value as the message states it
    shown_checks = [m.value for m in at.markdown if ":material/c" in m.value]
    assert shown_checks == [
        f":red-background[:material/cancel: **{r.name}** fails]: :red[{r.message}]  \n"
        f"value {formats.check_value(r.value, r.unit)}, threshold {formats.check_value(r.threshold, r.unit)}"
        for r in failing
    ] + [f":green[:material/check_circle: **{r.name}**]: {r.message}" for r in passing]
    usable = analyses.trend(con, RUN, "usable")
    assert traces(figure(at, "trend-usable"))["usable"]["y"] == usable["usable"].tolist()
    # a failing check names a few of the rollouts it rests on; a passing one links to their list alone
    captions = "\n".join(c.value for c in at.caption)
    for r in results:
        selection = examples.CHECKS.get(r.name)
        if selection is None:
            continue
        picked = examples.rollouts(con, RUN, selection)
        if r.ok:
            assert links.listing_line(RUN, f"check:{r.name}", selection) in captions
        else:
            assert len(picked) and links.example_line(RUN, f"check:{r.name}", selection, picked) in captions


def test_funnel_page_draws_the_funnel_and_answers_what_if(sample_store, con):
    at = open_page(sample_store, "funnel")
    assert_clean(at)
    row = analyses.funnel(con, RUN).iloc[0]
    assert figure(at, "funnel")["data"][0]["x"] == [row[s] for s in semconv.FUNNEL_STAGES]
    by_step = analyses.funnel(con, RUN, by="step").dropna(subset=["step"])
    shown = traces(figure(at, "rates-by-step"))
    assert shown["nonzero signal rate"]["y"] == pytest.approx(by_step["nonzero_signal_rate"].tolist())
    mean = by_step["nonzero_signal_rate"].astype(float).rolling(10, min_periods=1).mean()
    assert shown["nonzero signal rate (mean of 10 steps)"]["y"] == pytest.approx(mean.tolist())
    losses = analyses.funnel_losses(con, RUN)
    assert figure(at, "losses")["data"][0]["x"] == losses["lost"].tolist()

    rates = {k: float(row[f"{k}_rate"]) for k in ("completion", "scoring", "nonzero_signal", "freshness")}
    # the first view is a useful target: the weakest stage 20 points up, so the gain is not 0.0 %
    weakest = min(rates, key=rates.get)
    start = min(100, round(100 * rates[weakest]) + 20)
    assert at.slider(key=f"what-if-{weakest}").value == start
    first = analyses.what_if(int(row["dispatched"]), rates, {weakest: start / 100})
    assert metrics(at)["Worth a decode-throughput increase of"] == charts.rate(first["throughput_gain"])
    assert first["throughput_gain"] > 0
    at.slider(key="what-if-nonzero_signal").set_value(80).run()  # sliders are in %
    expected = analyses.what_if(int(row["dispatched"]), rates, {"nonzero_signal": 0.8})
    assert metrics(at)["Usable with these rates"] == charts.number(expected["new_usable"], 0)
    assert metrics(at)["Worth a decode-throughput increase of"] == charts.rate(expected["throughput_gain"])


def test_compute_page_stacks_terms_per_step_in_either_unit(sample_store, con):
    at = open_page(sample_store, "compute")
    terms = analyses.compute_terms(con, RUN, by="step")
    step0 = terms[terms["step"] == 0].set_index("term")
    shown = traces(figure(at, "compute-by-step"))
    assert shown["rollout"]["x"][0] == "0"
    assert shown["rollout"]["y"][0] == pytest.approx(step0.at["rollout", "device_seconds"], rel=5e-3)
    at.segmented_control(key="compute-measure").set_value("FLOPs").run()
    shown = traces(figure(at, "compute-by-step"))
    assert shown["train"]["y"][0] == pytest.approx(step0.at["train", "flops"])
    work = analyses.token_work(con, RUN)
    assert metrics(at)["Times trained"] == charts.number(work["trained"])
    # one colour per compute term on every page (the waterfall's spans take their term's), none error-red
    assert {
        t: shown[t]["marker"]["color"] for t in ("rollout", "train", "teacher", "judge") if t in shown
    } == {t: charts.TERM_COLORS[t] for t in ("rollout", "train", "teacher", "judge") if t in shown}
    kinds = {"turn": "rollout", "train_step": "train", "judge": "judge", "teacher": "teacher", "tool": "env"}
    assert {k: charts.KIND_COLORS[k] for k in kinds} == {k: charts.TERM_COLORS[t] for k, t in kinds.items()}
    assert not {"#ef4444", "#dc2626", "#ff0000"} & set(charts.TERM_COLORS.values())


def test_prefill_decode_page_shows_ratios_and_the_disaggregation_verdict(sample_store, con):
    at = open_page(sample_store, "prefill_decode")
    overall = analyses.prefill_decode(con, RUN).iloc[0]
    assert metrics(at)["New prefill : decode"] == charts.ratio(overall["prefill_decode_ratio"])
    by_env = analyses.prefill_decode(con, RUN, by="environment")
    shown = traces(figure(at, "pd-env"))
    assert shown["decode tokens"]["x"] == by_env["environment"].tolist()
    assert shown["decode tokens"]["y"] == by_env["decode_tokens"].tolist()
    assert figure(at, "pd-env")["layout"]["yaxis"]["type"] == "log"  # small environments stay visible
    by_turn = analyses.prefill_decode(con, RUN, by="turn_index")
    ratio = figure(at, "pd-turn")["data"][0]
    assert ratio["text"] == [f"n={charts.count(n)}" for n in by_turn["turns"]]  # what each point rests on
    reasons = analyses.disaggregation(con, RUN)["reasons"]
    assert any(md.value == "\n".join(f"- {r}" for r in reasons) for md in at.markdown)


SPLIT_PARTS = (  # what a prompt token cost, as the Prefill / decode page stacks it (docs/metrics.md)
    "cached_tokens",
    "new_tokens",
    "reprefill_retokenized_tokens",
    "reprefill_evicted_tokens",
    "reprefill_server_changed_tokens",
    "reprefill_unattributed_tokens",
    "reprefill_compacted_tokens",
    "prompt_reprefill_tokens",
    "compaction_removed_tokens",
)


@pytest.mark.long
def test_prefill_decode_page_splits_prefill_by_remedy_per_step_and_turn_with_the_what_ifs():
    """On a simulated run with every remedy's waste: the split's stacked bars per step and per turn index are the
    analysis's columns, with labelled axes, and each remedy's what-if is the advisor's lever."""
    from tests.simulated_runs import simulated

    store, _ = simulated("samples")
    at = open_page(store, "prefill_decode", run="samples")
    assert_clean(at)
    con = Reader(store).con
    whole = analyses.record(analyses.prefill_split(con, "samples"))
    shown = metrics(at)
    assert shown["Extra samples from compaction"] == charts.count(whole["extra_samples"])
    assert shown["History prefilled again"] == charts.device_seconds(whole["reprefill_device_s"])
    for by, key, x_title in (
        ("step", "pd-split-step", "train step"),
        ("turn_index", "pd-split-turn", "turn index"),
    ):
        frame = analyses.prefill_split(con, "samples", by=by).dropna(subset=[by])
        fig = figure(at, key)
        assert fig["layout"]["barmode"] == "stack"
        assert (fig["layout"]["xaxis"]["title"]["text"], fig["layout"]["yaxis"]["title"]["text"]) == (
            x_title,
            "prompt tokens",
        )
        bars = traces(fig)
        assert set(bars) == {charts.label(c) for c in SPLIT_PARTS}
        for column in SPLIT_PARTS:
            assert bars[charts.label(column)]["y"] == frame[column].tolist(), (by, column)
    what_if = analyses.prefill_what_if(con, "samples")
    listed = next(md.value for md in at.markdown if md.value.startswith("- **Exact continuity")).split("\n")
    assert len(listed) == len(what_if) == 3
    for line, row in zip(listed, what_if.values(), strict=True):
        assert f"**: {charts.change(row['gain'])} usable rollouts per device-second" in line
        assert f"→ {charts.count(row['device_seconds_after'])}" in line and line.endswith(
            f"{row['evidence']}."
        )


@pytest.mark.long
def test_a_rollout_shows_where_continuity_broke_and_where_it_was_compacted():
    from tests.simulated_runs import simulated

    store, _ = simulated("samples")
    con = Reader(store).con
    (rollout,) = con.execute(
        "SELECT rollout_id FROM turns WHERE run_id = 'samples' AND compaction_tokens_before IS NOT NULL "
        "ORDER BY rollout_id LIMIT 1"
    ).fetchone()
    at = open_page(store, "rollouts", run="samples", **{"rollout-text": rollout})
    at.selectbox(key="open-rollout").set_value(rollout).run()
    assert_clean(at)
    marks = trace.continuity(con, "samples", rollout)
    # the conversation view marks the header of the turn that starts from a compacted context
    compacted = marks.dropna(subset=["compaction_tokens_before"]).iloc[0]
    note = (
        f"✂ from a compacted context ({charts.count(compacted['compaction_tokens_before'])} → "
        f"{charts.count(compacted['compaction_tokens_after'])} tokens)"
    )
    pages = at.select_slider(key=f"turn-page:{rollout}")  # a long rollout shows a page of turns at a time
    for label in pages.options:
        first, last = map(int, label.split(" ")[1].split("–"))
        if first <= compacted["turn_index"] + 1 <= last:
            pages.set_value(label).run()
    assert any(note in md.value for md in at.markdown)
    at.segmented_control(key="rollout-view").set_value("Timeline").run()
    labels = [y for t in figure(at, "waterfall")["data"] for y in t["y"]]
    for mark in marks.itertuples():
        (row,) = [y for y in labels if y.split(". ", 1)[1].split(" ")[:2] == ["turn", str(mark.turn_index)]]
        if not pd.isna(mark.compaction_tokens_before):
            assert row.endswith(
                f"✂ compacted {charts.count(mark.compaction_tokens_before)} → "
                f"{charts.count(mark.compaction_tokens_after)}"
            )
        elif not pd.isna(mark.continuity_break):
            assert f"⟲ {charts.label(mark.continuity_break)}" in row
        else:
            assert "⟲" not in row and "✂" not in row
    table = next(d.value for d in at.dataframe if "continuity_break" in d.value.columns)
    marked = marks[marks["continuity_break"].notna() | marks["compaction_tokens_before"].notna()]
    assert table["turn_index"].tolist() == [charts.count(i) for i in marked["turn_index"]]
    samples = int(marks["sample"].max()) + 1
    assert any(f"compaction made it {samples} training samples" in md.value for md in at.markdown)


def test_spec_decode_page_warns_about_drift_and_draws_acceptance(sample_store, con):
    at = open_page(sample_store, "spec_decode")
    assert_clean(at)
    # d0 drifted, but d4 replaced it at policy version 4: a note, not a call to refresh a retired drafter
    assert not [w.value for w in at.warning if "d0" in w.value]
    assert any("Drafter d0 drifted before it was replaced" in c.value for c in at.caption)
    overall = analyses.spec_decode(con, RUN).iloc[0]
    shown_metrics = metrics(at)
    assert shown_metrics["Draft budget k (spec_k)"] == charts.count(overall["k"])
    assert shown_metrics["Effective speed-up"] == f"{charts.number(overall['effective_speedup'])} ×"
    assert overall["effective_speedup"] == pytest.approx(overall["mean_accepted_length"] + 1)
    by_version = analyses.spec_decode(con, RUN, by="policy_version")
    shown = figure(at, "spec-version")
    assert shown["data"][0]["x"] == by_version["policy_version"].tolist()
    assert shown["data"][0]["y"] == pytest.approx(by_version["acceptance_rate"].tolist())
    refresh = shown["layout"]["shapes"][0]  # the drafter rebuilt at policy version 4 is marked
    assert (refresh["x0"], shown["layout"]["annotations"][0]["text"]) == (4, "drafter d4")


@pytest.mark.skipif(not layout.run_ids(sidebar.SAMPLE_STORE), reason="sample_data/ holds no run yet")
def test_the_logprob_lint_is_an_error_at_the_top_not_a_drift_warning():
    at = open_page(sidebar.SAMPLE_STORE, "spec_decode", run=None)  # the sample records drafter log-probs
    assert_clean(at)
    first = next(m.value for m in at.markdown if "lint" in m.value.lower())
    assert first.startswith(":red-background[:material/error: **Log-prob lint fails**]")
    assert all("lint" not in w.value.lower() for w in at.warning)  # the yellow is for drift only


def test_staleness_page_draws_the_distribution_against_the_bound(sample_store, con):
    at = open_page(sample_store, "staleness")
    summary = analyses.staleness_summary(con, RUN)
    shown_metrics = metrics(at)
    assert shown_metrics["Beyond the bound"] == charts.count(summary["beyond_bound"])
    assert shown_metrics["Used beyond the bound"] == charts.count(summary["used_beyond_bound"])
    assert shown_metrics["Within the bound"] == charts.rate(summary["within_bound_share"])
    dist = analyses.staleness(con, RUN)
    shown = figure(at, "staleness")
    assert shown["data"][0]["y"] == dist["samples"].tolist()
    assert shown["layout"]["shapes"][0]["x0"] == summary["bound"] + 0.5
    throughput = analyses.throughput(con, RUN)
    assert metrics(at)["Rollout length p99 (tokens)"] == charts.count(throughput["length_p99"])
    timing = analyses.staleness_timing(con, RUN)
    split = traces(figure(at, "staleness-split"))
    assert split["queued versions mean"]["y"] == pytest.approx(timing["queued_versions_mean"].tolist())
    assert split["in flight versions mean"]["y"] == pytest.approx(timing["in_flight_versions_mean"].tolist())


def test_learning_page_draws_rewards_zero_signal_tasks_and_mismatch(sample_store, con):
    at = open_page(sample_store, "learning")
    assert_clean(at)
    run = analyses.record(analyses.learning(con, RUN))
    shown = metrics(at)
    assert shown["Mean reward"] == charts.number(run["reward_mean"])
    assert shown["Success rate"] == charts.rate(run["success_rate"])
    tasks = analyses.task_solve_rates(con, RUN)
    assert shown["Tasks never solved"] == charts.count(int((tasks["status"] == "never solved").sum()))
    by_step = analyses.learning(con, RUN, by="step")
    assert traces(figure(at, "reward"))["median"]["y"] == pytest.approx(by_step["reward_p50"].tolist())
    zero = analyses.zero_signal(con, RUN, by="step")
    bars = traces(figure(at, "zero-signal"))
    assert sum(sum(t["y"]) for t in bars.values()) == zero["zero_signal_rollouts"].sum()
    kl = figure(at, "mismatch")
    assert kl["layout"]["yaxis"]["title"]["text"] == "KL per token (nats)"
    assert kl["data"][0]["y"] == pytest.approx(
        analyses.mismatch(con, RUN, "step")["mismatch_kl_mean"].tolist()
    )


def test_rollouts_page_finds_rollouts_and_opens_one_as_a_waterfall(sample_store, con):
    at = open_page(sample_store, "rollouts")
    found = trace.search(con, RUN)
    assert at.dataframe[0].value["rollout_id"].tolist() == found["rollout_id"].tolist()
    at.text_input(key="rollout-text").input("s1-g0").run()
    assert (
        at.dataframe[0].value["rollout_id"].tolist()
        == trace.search(con, RUN, text="s1-g0")["rollout_id"].tolist()
    )
    at.selectbox(key="open-rollout").set_value("s1-g0-0").run()
    # this run recorded no content: the conversation says so once, then shows each turn's accounting
    assert [i.value for i in at.info] == [
        "No transcript recorded for this rollout (capture off, or the rollout's group sampled out); its turns' "
        "accounting:"
    ]
    assert not [c.value for c in at.caption if "no content recorded" in c.value]
    at.segmented_control(key="rollout-view").set_value("Timeline").run()
    spans = trace.spans(con, RUN, "s1-g0-0")
    bars = sum(len(t["y"]) for t in figure(at, "waterfall")["data"])
    assert bars == len(spans)
    consumer = trace.rollout(con, RUN, "s1-g0-0")
    assert f"Consumed by train step **{consumer['train_step']}**" in at.success[0].value
    # turns, tokens and durations with their units in the list
    listed = at.dataframe[0].value.set_index("rollout_id").loc["s1-g0-0"]
    row = found.set_index("rollout_id").loc["s1-g0-0"]
    assert (listed["turns"], listed["decoded_tokens"]) == (
        charts.count(row["turns"]),
        charts.count(row["decoded_tokens"]),
    )
    assert listed["duration"] == charts.seconds(row["duration_s"]) and listed["duration"].endswith("s")
    # the group view: its sibling attempts' rewards and advantages (reward − the group's mean)
    at.segmented_control(key="rollout-view").set_value("Group").run()
    group = next(d.value for d in at.dataframe if "advantage" in d.value.columns)
    siblings = con.execute(
        "SELECT rollout_id, reward FROM rollouts WHERE run_id = $run AND group_id = (SELECT group_id FROM "
        "rollouts WHERE run_id = $run AND rollout_id = 's1-g0-0') ORDER BY start_ns, rollout_id",
        {"run": RUN},
    ).df()
    assert group["rollout_id"].tolist() == siblings["rollout_id"].tolist()
    mean = siblings["reward"].mean()
    assert group["advantage"].tolist() == [charts.number(r - mean) for r in siblings["reward"]]
    assert group.set_index("rollout_id").loc["s1-g0-0", ""] == "▶"


@pytest.mark.parametrize(
    "filters",
    [{}, {"status": "ok"}, {"environment": "swe", "reward": (0.5, 1.0)}, {"text": "g1"}, {"steps": (2, 5)}],
    ids=["none", "status", "environment-and-reward", "text", "steps"],
)
def test_rollout_search_finds_the_newest_matches_the_filters_name(con, filters):
    """What the Rollouts page lists, against the same rows in plain SQL: the newest ``limit`` rollouts that
    match, newest first (a limit far below the matches, so which ones are the newest matters)."""
    where = ["run_id = $run"]
    if "status" in filters:
        where.append(f"rollout_status = '{filters['status']}'")
    if "environment" in filters:
        where.append(f"environment = '{filters['environment']}'")
    if "reward" in filters:
        where.append(f"reward BETWEEN {filters['reward'][0]} AND {filters['reward'][1]}")
    if "text" in filters:
        where.append(f"(rollout_id ILIKE '%{filters['text']}%' OR task_id ILIKE '%{filters['text']}%')")
    if "steps" in filters:
        where.append(
            f"rollout_id IN (SELECT rollout_id FROM rollout_steps($run) WHERE step BETWEEN {filters['steps'][0]} "
            f"AND {filters['steps'][1]})"
        )
    oracle = con.execute(
        f"SELECT rollout_id FROM rollouts WHERE {' AND '.join(where)} ORDER BY start_ns DESC, rollout_id LIMIT 7",
        {"run": RUN},
    ).fetchall()

    found = trace.search(con, RUN, limit=7, **filters)

    assert len(oracle) == 7
    assert found["rollout_id"].tolist() == [r for (r,) in oracle]


def test_compare_page_puts_two_reports_side_by_side(sample_store, con):
    at = open_page(sample_store, "compare")
    assert_clean(at)
    expected = comparison.report_table(con, {RUN: report(con, RUN), "exp-8": report(con, "exp-8")})
    shown = at.dataframe[0].value
    assert shown["figure"].tolist() == expected["figure"].tolist()
    for column in (RUN, "exp-8", "change"):  # numbers to 0.5 %: compute_terms' busy time wobbles (see report)
        assert [same_cell(a, b) for a, b in zip(shown[column], expected[column], strict=True)] == [
            True
        ] * len(shown)
    rows = shown.set_index("figure")
    dispatched = rows.loc["Funnel · dispatched"]
    assert (dispatched[RUN], dispatched["exp-8"], dispatched["change"]) == ("80", "48", "-32")
    assert dispatched["relative change"] == "-40.0 %"
    usable = report(con, RUN)["funnel"]["usable"], report(con, "exp-8")["funnel"]["usable"]
    assert rows.loc["Funnel · usable", "better"] == (RUN if usable[0] > usable[1] else "exp-8")
    assert "funnel.rates.completion" not in rows.index and "Funnel · completion rate" in rows.index
    assert rows.loc["Funnel · completion rate", RUN].endswith(" %")
    # the better run's cell is shaded green, and no other cell: (row, column) of each shaded cell
    styles = at.dataframe[0].proto.arrow_data.styler.styles
    shaded = {
        (int(row), int(col))
        for rule in styles.split("}")
        if "#dcfce7" in rule
        for row, col in re.findall(r"_row(\d+)_col(\d+)", rule)
    }
    columns = shown.columns.tolist()
    better = {(i, columns.index(run)) for i, run in enumerate(shown["better"]) if run in (RUN, "exp-8")}
    assert shaded == better and better


def test_sql_page_runs_the_example_and_refuses_writes(sample_store, con):
    at = open_page(sample_store, "sql")
    assert_clean(at)
    at.button[0].click().run()
    expected = Reader(sample_store).sql(explorer.sql_example())
    assert at.dataframe[0].value.to_dict("list") == expected.to_dict("list")
    at.text_area(key="sql-text").input("COPY rollouts TO 'out.csv'")
    at.button[0].click().run()
    assert "Read-only" in at.error[0].value
    at.text_area(key="sql-text").input("  -- nothing yet")
    at.button[0].click().run()
    assert at.error[0].value.startswith("**Empty query**: there is no SQL here, only blanks or comments")
    # the table macros and each view's columns are listed beside the editor
    listed = " ".join(m.value for m in at.markdown)
    assert (
        f"`rollout_stages('{RUN}')`" in listed and f"`consumed_samples('{RUN}', NULL, NULL, NULL)`" in listed
    )
    assert any(e.label.startswith("`turns`") for e in at.expander)
    assert "`new_input_tokens`" in " ".join(c.value for c in at.caption)


def test_sidebar_filters_apply_to_every_figure(sample_store, con):
    # (AppTest does not see the sidebar of an st.navigation app after its first run, so the filters are
    # chosen before it, as a user arriving with them set.)
    at = open_page(sample_store, **{f"environment:{RUN}": "swe"})
    swe = report(con, RUN, environment="swe")
    assert metrics(at)["Rollouts dispatched"] == charts.count(swe["funnel"]["dispatched"]) == "40"
    at = open_page(sample_store, "funnel", **{f"environment:{RUN}": "swe", f"steps:{RUN}:(0, 4)": (1, 2)})
    row = analyses.funnel(con, RUN, steps=(1, 2), environment="swe").iloc[0]
    assert figure(at, "funnel")["data"][0]["x"] == [row[s] for s in semconv.FUNNEL_STAGES]
    assert row["dispatched"] < swe["funnel"]["dispatched"]


@pytest.mark.parametrize("page", PAGES)
def test_an_empty_store_explains_itself_on_every_page(empty_store, page):
    at = open_page(empty_store, page, run=None)
    assert not at.exception
    assert "holds no runs yet" in at.info[0].value


def test_a_missing_store_is_an_error_message_not_a_traceback(tmp_path):
    at = open_page(tmp_path / "nowhere", run=None)
    assert not at.exception
    assert "No store at" in at.error[0].value


def test_an_unknown_run_in_the_address_is_named(sample_store):
    at = open_page(sample_store, run="exp-99")
    assert not at.exception
    assert "Unknown run" in at.error[0].value and "exp-7, exp-8" in at.error[0].value


def test_a_run_without_speculative_decoding_says_so(sample_store):
    at = open_page(sample_store, "spec_decode", run="exp-8")
    assert_clean(at)
    assert "No speculative decoding" in at.info[0].value


def test_a_run_without_turns_says_so(tmp_path):
    store = tmp_path / "store"
    writer = RunWriter(store, "trainer-only", seed=1)
    with writer.train.train_step(0, policy_version=1, train_wait_s=1.0):
        pass
    writer.shutdown()
    expected = {
        "prefill_decode": "No turns",
        "spec_decode": "No speculative decoding",
        "overview": "No rollouts",
        "funnel": "No rollouts",
        "rollouts": "No rollout matches",
    }
    for page, message in expected.items():
        at = open_page(store, page, run="trainer-only")
        assert_clean(at)
        assert message in at.info[0].value, page


@pytest.fixture(scope="module")
def just_attached(tmp_path_factory):
    """README's first example: one rollout with a turn and a tool call, written by attach(); no train step
    has consumed anything, and no group has two scored attempts (the nonzero-signal rate is undefined)."""
    from rollscope import attach

    store = tmp_path_factory.mktemp("just-attached") / "runs"
    rl = attach(
        store=store, run_id="exp-7", role="rollout", devices=8, model_parameters=8e9, set_global=False
    )
    with rl.rollout(task_id="t-19", group_id="t-19/3", environment="swe", policy_version=41) as rollout:
        with rl.turn(
            0, input_tokens=3_150, cached_input_tokens=3_000, output_tokens=150, context_tokens=3_000
        ):
            pass
        with rl.tool("run_tests", sandbox_id="sb-7", tool_exit_code=1, observation_tokens=3_000):
            pass
        rollout.set(reward=1.0, rollout_status="ok")
    rl.shutdown()
    return store


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_run_just_attached(just_attached, page):
    at = open_page(just_attached, page)
    assert_clean(at)
    if page == "funnel":  # the what-if starts from rates that are not measured yet: shown as such
        assert "now —" in [c.value for c in at.caption]


def test_a_file_in_the_store_that_is_not_a_segment_is_named_on_the_page(tmp_path):
    """On opening the run, and when one appears in a live run: the page names it in one line until it is moved
    out, then draws the run again."""
    store = tmp_path / "runs"
    writer = RunWriter(store, "r1", seed=3)
    writer.write_step()
    writer.flush()
    stray = store / "spans" / "run_id=r1" / "seg-9999999999999-deadbeef00-000001.parquet"
    stray.write_bytes(b"PAR1 and then the writer died")

    def named(at: AppTest) -> bool:
        assert not at.exception, [e.value for e in at.exception]
        return [e.value.split(":")[0] for e in at.error] == ["**Unreadable segment**"] and str(stray) in (
            at.error[0].value
        )

    assert named(open_page(store, run="r1"))
    stray.unlink()
    at = open_page(store, run="r1")
    assert_clean(at)
    stray.write_bytes(b"PAR1 and then the writer died")
    deadline = time.monotonic() + 20
    while not named(at) and time.monotonic() < deadline:
        time.sleep(0.5)  # what the page's live fragment does every interval
        at.run()
    for _ in range(3):  # shown on every tick, not one in two
        time.sleep(0.5)
        assert named(at.run())
    stray.unlink()
    while at.error and time.monotonic() < deadline + 20:
        time.sleep(0.5)
        at.run()
    assert_clean(at)
    assert int(metrics(at)["Rollouts dispatched"]) == writer.rollouts
    writer.shutdown()


def live_page(tmp_path: Path):
    """A live run's Overview open on its first step, then a second step published: the writer, the page, the
    rollouts it shows and the store's LiveStore (with its segment count before the second step)."""
    store = tmp_path / "live"
    writer = RunWriter(store, "live-1", seed=3)
    writer.write_step()
    writer.flush()
    at = open_page(store, run="live-1")
    live = readers.live_store(str(store))
    shown, segments = dispatched(at), live.segment_count()
    writer.write_step()
    writer.flush()
    return writer, at, shown, live, segments


def dispatched(at: AppTest) -> int:
    return int(metrics(at)["Rollouts dispatched"])


def redraw_while(at: AppTest, shown: int, seconds: float = 20) -> None:
    """Re-run the page every half second, as its live fragment does, while it shows ``shown`` rollouts."""
    deadline = time.monotonic() + seconds
    while dispatched(at) == shown and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()


@pytest.mark.long
def test_new_spans_appear_on_a_later_refresh_which_reads_only_new_segments(tmp_path):
    writer, at, before, live, segments = live_page(tmp_path)
    redraw_while(at, before)
    assert dispatched(at) == before + 16 == writer.rollouts
    new_files = len(list((tmp_path / "live" / "spans").rglob("*.parquet"))) - segments
    assert live.segment_count() - segments == new_files > 0
    writer.shutdown()


@pytest.mark.long
def test_a_page_draws_at_once_while_new_segments_are_taken_in(tmp_path):
    """Taking in new segments of a long live run takes seconds (its derived state is brought up to date); the
    page never waits for that: it draws what was read so far, and a later tick draws what came in."""
    writer, at, before, live, _ = live_page(tmp_path)
    with live.reader("live-1")._lock:  # what a catch-up holds while it runs (Reader.refresh)
        deadline = time.monotonic() + 20
        while not live.refreshing and time.monotonic() < deadline:
            time.sleep(0.5)  # what the page's live fragment does every interval
            at.run(timeout=30)  # a page that waited for the catch-up would time out here
            assert dispatched(at) == before
        assert live.refreshing, "no catch-up started"
    redraw_while(at, before)
    assert dispatched(at) == before + 16 == writer.rollouts
    writer.shutdown()


def test_the_command_serves_locally_headless_without_usage_stats(tmp_path):
    from rollscope.app.commands.dashboard import streamlit_command

    command = streamlit_command(tmp_path, 8600)
    flags = dict(zip(command[5::2], command[6::2], strict=False))
    assert command[1:4] == ["-m", "streamlit", "run"] and command[4].endswith("app/dashboard.py")
    assert {
        k: flags[k]
        for k in ("--server.address", "--server.port", "--server.headless", "--browser.gatherUsageStats")
    } == {
        "--server.address": "127.0.0.1",
        "--server.port": "8600",
        "--server.headless": "true",
        "--browser.gatherUsageStats": "false",
    }
    assert command[-3:] == ["--", "--store", str(tmp_path)]
    assert "--" not in streamlit_command(None, 8600)  # no --store: the app opens sample_data/


def test_a_port_in_use_is_one_line_before_any_server_starts(tmp_path):
    """Not our address printed and then Streamlit's "Port N is not available" in its log format."""
    import socket
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rollscope.app.cli",
                "dashboard",
                "--port",
                str(port),
                "--store",
                tmp_path,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr == f"rollscope: Port in use: cannot serve on 127.0.0.1:{port}: Address already in use; "
        "choose another with --port\n"
    )


def test_the_command_defaults_to_rollscope_store(tmp_path, monkeypatch):
    import argparse

    from rollscope.app.commands.dashboard import chosen_store

    monkeypatch.setenv("ROLLSCOPE_STORE", str(tmp_path / "env-store"))
    assert chosen_store(argparse.Namespace(store=None)) == tmp_path / "env-store"
    assert chosen_store(argparse.Namespace(store=str(tmp_path / "given"))) == tmp_path / "given"
    monkeypatch.setenv("ROLLSCOPE_STORE", "")
    assert chosen_store(argparse.Namespace(store=None)) is None  # the shipped sample_data/


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_demo_takes_a_store_and_a_port(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # make test
    dry_run = ["make", "-n", "--no-print-directory", "-o", ".venv/.installed", "demo"]
    run = subprocess.run(
        [*dry_run, f"STORE={tmp_path}/my runs", "PORT=8601"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith(f"rollscope dashboard --store '{tmp_path}/my runs' --port 8601")
    plain = subprocess.run(dry_run, cwd=ROOT, capture_output=True, text=True, env=env)
    assert plain.stdout.strip().endswith("rollscope dashboard"), plain.stdout


def test_the_command_refuses_a_file_for_a_store(tmp_path):
    from tests.conftest import rollscope

    not_a_store = tmp_path / "runs.txt"
    not_a_store.write_text("")
    code, _, err = rollscope("dashboard", "--store", not_a_store)
    assert code == 1 and "Not a store" in err


def test_a_long_series_draws_thinned_yet_keeps_every_spike_and_dip():
    """A run of 30,000 steps draws a few hundred points per line, and a one-step excursion still shows: each
    bucket of consecutive steps keeps its first, lowest and highest point; missing values are never kept as
    either."""

    steps = pd.Series(range(30_000))
    values = pd.Series(np.sin(np.arange(30_000) / 500.0))
    values[12_345], values[23_456] = 9.0, -9.0  # a spike and a dip, one step each
    values[100:400] = None  # steps without a value
    xs, ys = map(list, charts.thinned(steps, values))
    assert len(xs) <= 3 * charts.MAX_POINTS // 2
    assert xs == sorted(xs) and xs[0] == 0
    drawn = dict(zip(xs, ys, strict=True))
    assert drawn[12_345] == 9.0 and drawn[23_456] == -9.0
    assert max(ys) == 9.0 and min(ys) == -9.0
    assert all(not np.isnan(drawn[s]) for s in drawn if not 100 <= s < 400)
    assert all(drawn[s] == values[s] or np.isnan(values[s]) for s in drawn)
    short = pd.Series([1.0, None, 3.0])
    xs, ys = charts.thinned(pd.Series([1, 2, 3]), short)
    assert list(xs) == [1, 2, 3] and np.isnan(ys[1])  # short lines are drawn whole, a missing value as a gap


def test_a_detector_firing_hundreds_of_times_shades_every_fired_step_with_a_few_hundred_shapes_at_most():
    """Over 30,000 steps a detector fires in 400 stretches: the chart shades at most MAX_SHADED, merged across
    the narrowest gaps, so every fired step is still shaded and the widest quiet stretches stay clear."""
    import plotly.graph_objects as go

    rng = np.random.default_rng(7)
    firsts = np.sort(rng.choice(np.arange(0, 30_000, 60), size=400, replace=False))
    lasts = firsts + rng.integers(0, 20, size=400)
    episodes = pd.DataFrame({"first_step": firsts, "last_step": lasts}).sample(frac=1, random_state=1)
    shapes = charts.firing(go.Figure(), episodes, "kl-acceleration").layout.shapes
    assert len(shapes) == charts.MAX_SHADED
    spans = sorted((s.x0, s.x1) for s in shapes)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))  # apart, in step order
    assert all(any(x0 < lo and hi < x1 for x0, x1 in spans) for lo, hi in zip(firsts, lasts, strict=True))
    gaps = sorted(b - a for a, b in zip(lasts, firsts[1:], strict=False))
    clear = [b[0] - a[1] + 1 for a, b in zip(spans, spans[1:], strict=False)]  # first - last again
    assert sorted(clear) == gaps[-(charts.MAX_SHADED - 1) :]  # the widest gaps are the ones left open
    few = episodes.head(3)
    assert len(charts.firing(go.Figure(), few, "kl-acceleration").layout.shapes) == 3  # few: one shape each
