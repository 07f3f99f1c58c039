"""Reading transcripts: a rollout as a conversation beside its accounting, on the Rollouts page (AppTest) and in
`rollscope show`, its group and task, text search, and the example rollouts every loss, check and lever links
to. The store is an agent run written through the helpers (tests/transcript_fixtures.py), whose texts are the
ground truth."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from benchmarks.fixtures.agent_runs import HOSTILE, SYSTEM, write_agent_run
from benchmarks.fixtures.app_test import app_test
from rollscope.app import charts, conversation
from rollscope.app import links as app_links
from rollscope.errors import QueryError
from rollscope.queries import examples, transcripts
from rollscope.queries.reader import Reader
from tests.conftest import rollscope

APP = Path(__file__).resolve().parent.parent / "app" / "dashboard.py"
RUN = "agent"
BIG = 1_000_000  # characters of big-0's tool output
LONG = 200  # tool turns of long-0


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    store = tmp_path_factory.mktemp("transcripts") / "store"
    run = write_agent_run(store, RUN, long_turns=LONG, big_output=BIG)
    return store, run


@pytest.fixture(scope="module")
def con(agent):
    return Reader(agent[0]).con


def contents(frame) -> list:
    said = frame[frame["source"].notna()]
    return [None if charts.missing(c) else c for c in said["content"]]


def open_viewer(store: Path, rollout: str | None = None, **params) -> AppTest:
    at = app_test(APP, 120)
    at.session_state["store"] = str(store)
    at.query_params["run"] = RUN
    if rollout is not None:
        at.query_params["rollout"] = rollout
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("screens/rollouts.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def table(at: AppTest, *columns: str):
    """The first table the page drew with these columns (AppTest does not expose a dataframe's key)."""
    found = [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]
    assert found, f"no table with columns {columns}"
    return found[0]


def shown_texts(at: AppTest) -> list[str]:
    """Every text the page drew as text (st.text and st.code), in order."""
    return [e.value for e in at.main if e.type in ("text", "code")] or [
        *[t.value for t in at.text],
        *[c.value for c in at.code],
    ]


# --- queries ------------------------------------------------------------------------------------------------


def test_a_rollout_reads_back_as_its_conversation_beside_each_turns_accounting(agent, con):
    _, run = agent
    for attempt in list(run.attempts.values())[:6]:
        frame = transcripts.conversation(con, RUN, attempt.rollout_id, max_chars=None)
        assert contents(frame) == attempt.texts
    frame = transcripts.conversation(con, RUN, "s0-g0-0")
    turns = con.execute(
        "SELECT turn_index, input_tokens, cached_input_tokens, output_tokens, prefill_time_s, decode_time_s, "
        "spec_accepted_tokens / spec_draft_tokens AS acceptance FROM turns WHERE run_id = ? AND rollout_id = ? "
        "ORDER BY start_ns",
        [RUN, "s0-g0-0"],
    ).df()
    per_turn = frame[frame["kind"] == "turn"].drop_duplicates("span_id")
    for column in turns.columns:
        assert per_turn[column].tolist() == pytest.approx(turns[column].tolist(), nan_ok=True), column
    assert frame["kind"].drop_duplicates().tolist() == ["turn", "tool", "reward", "judge"]
    judge = frame[frame["kind"] == "judge"]
    assert (
        judge["reward"].tolist() == [1.0, 1.0] and judge["content"].iloc[1] == "Yes: the assertion now holds."
    )


def test_a_long_text_is_cut_for_showing_and_read_whole_on_demand(agent, con):
    _, run = agent
    log = run.attempts["big-0"].texts[4]
    assert len(log) == BIG
    frame = transcripts.conversation(con, RUN, "big-0")
    row = frame[frame["content"].str.contains("not shown", na=False)].iloc[0]
    assert bool(row["shown_cut"]) and not row["truncated"] and row["content_chars"] == len(log)
    keep = transcripts.SHOWN_CHARS
    assert row["content"].startswith(log[: keep * 3 // 4]) and row["content"].endswith(log[-(keep // 4) :])
    assert f"[{len(log) - keep:,} of {len(log):,} characters not shown]" in row["content"]
    whole = transcripts.message(con, RUN, "big-0", int(row["span_id"]), int(row["ordinal"]))
    assert whole["content"] == log


def test_the_group_and_the_task_read_back_whole(agent, con):
    _, run = agent
    group = transcripts.group_conversations(con, RUN, "s1-g0-2")
    siblings = [a for a in run.attempts.values() if a.group_id == "s1-g0"]
    assert sorted(group["rollout_id"].unique()) == sorted(a.rollout_id for a in siblings)
    for attempt in siblings:
        assert contents(group[group["rollout_id"] == attempt.rollout_id]) == attempt.texts
    history = transcripts.history(con, RUN, "calc-add")
    attempts = run.of_task("calc-add")
    assert history["rollout_id"].tolist() == [a.rollout_id for a in attempts]  # written oldest first
    assert history["reward"].tolist() == [a.reward for a in attempts]
    assert history["step"].tolist()[:4] == [a.step + 1 for a in attempts][:4]  # consumed one step later


@pytest.mark.parametrize(
    ("pattern", "regex", "matches"),
    [
        ("ASSERT 3 == 4", False, lambda t: "assert 3 == 4" in t.lower()),
        (r"1[12] passed in 0\.(29|31)s", True, lambda t: re.search(r"1[12] passed in 0\.(29|31)s", t)),
        ("could not fix", False, lambda t: "could not fix" in t.lower()),
    ],
    ids=["substring", "regex", "answer"],
)
def test_text_search_finds_every_rollout_whose_transcript_matches(agent, con, pattern, regex, matches):
    _, run = agent
    expected = {a.rollout_id for a in run.attempts.values() if any(t and matches(t) for t in a.texts)}
    found = transcripts.search(con, RUN, pattern, regex=regex)
    assert set(found["rollout_id"]) == expected and expected
    assert all(matches(snippet) for snippet in found["snippet"])  # each snippet shows its first match


def test_text_search_takes_the_rollouts_filters(agent, con):
    _, run = agent
    clipped = {a.rollout_id for a in run.attempts.values() if "length" in a.finish_reasons}
    assert set(transcripts.search(con, RUN, finish_reason="length")["rollout_id"]) == clipped and clipped
    lost = con.execute(
        "SELECT rollout_id FROM rollout_stages(?) WHERE lost_at = 'nonzero_signal'", [RUN]
    ).fetchall()
    found = transcripts.search(con, RUN, "pytest", lost_at="nonzero_signal")
    assert set(found["rollout_id"]) == {r for (r,) in lost}
    found = transcripts.search(con, RUN, "pytest", reward=(0.5, None), steps=(2, 3))
    assert set(found["rollout_id"]) == {
        a.rollout_id for a in run.attempts.values() if a.reward >= 0.5 and a.step + 1 in (2, 3)
    }


def test_a_bad_regular_expression_is_a_one_line_error(con):
    with pytest.raises(QueryError) as raised:
        transcripts.search(con, RUN, "(unclosed", regex=True)
    assert (
        "\n" not in str(raised.value)
        and "unclosed" in str(raised.value).lower()
        or "missing )" in str(raised.value)
    )


def test_examples_name_a_few_of_a_selection_from_distinct_groups(agent, con):
    found = examples.rollouts(con, RUN, examples.LEVERS["prefix_reuse"])
    every = con.execute(
        "SELECT rollout_id, group_id, reprefilled FROM _rollout_work(?) JOIN rollout_stages(?) USING (rollout_id) "
        "WHERE reprefilled > 0",
        [RUN, RUN],
    ).df()
    assert len(found) == examples.EXAMPLES and found["total"].iloc[0] == len(every)
    assert found["group_id"].is_unique  # one per group while there are groups enough
    assert set(found["rollout_id"]) <= set(every["rollout_id"])
    line = examples.count_line(found, examples.LEVERS["prefix_reuse"])
    assert line.startswith(f"5 of the {len(every)} rollouts that prefilled history again")
    lost = examples.rollouts(con, RUN, examples.lost("nonzero_signal", "only scored attempt in its group"))
    assert set(lost["rollout_id"]) == {"hostile-0", "long-0", "big-0"}


# --- the terminal -------------------------------------------------------------------------------------------


def test_show_prints_the_transcript_with_turn_headers_and_token_counts(agent):
    store, run = agent
    code, out, err = rollscope("show", "--store", store, "--run", RUN, "--rollout", "s0-g0-0")
    assert (code, err) == (0, "")
    head = out.splitlines()
    assert head[0] == "rollout s0-g0-0 · run agent · environment swe · task calc-add · group s0-g0"
    assert "reward 1.00 (unit_tests 1.00, judge 1.00)" in head[1]
    assert head[2] == "consumed by train step 1 (decision used, staleness 1 version) · usable"
    assert re.fullmatch(r"\d+ turns? · \d+ messages?", head[3])  # worded by formats.counted
    assert re.search(r"^── turn 0 · 1,500 in \(0 cached\) · \d+ out · prefill 300 ms · decode ", out, re.M)
    assert "[system prompt]\n" + SYSTEM in out and "[judge rationale]\nYes: the assertion now holds." in out
    for text in run.attempts["s0-g0-0"].texts:
        assert text is None or text in out


def test_a_single_turn_and_a_staleness_of_one_are_worded_in_the_singular():
    from rollscope import formats

    words = [formats.counted(n, "turn") for n in (0, 1, 2, 1234, None)]
    assert words == ["0 turns", "1 turn", "2 turns", "1,234 turns", "— turns"]
    assert formats.counted(1, "version") == "1 version"


def test_show_cuts_long_texts_with_a_note_and_shows_them_whole_on_request(agent):
    store, run = agent
    _, out, _ = rollscope("show", "--store", store, "--run", RUN, "--rollout", "big-0")
    log = run.attempts["big-0"].texts[4]
    assert f"[{len(log) - 2_000:,} of {len(log):,} characters not shown]" in out and len(out) < 20_000
    _, whole, _ = rollscope("show", "--store", store, "--run", RUN, "--rollout", "big-0", "--max-chars", "0")
    assert log in whole


def test_show_json_is_a_stable_object_with_every_text_whole(agent):
    store, run = agent
    code, out, _ = rollscope("show", "--store", store, "--run", RUN, "--rollout", "big-0", "--json")
    shown = json.loads(out)
    assert code == 0 and set(shown) == {"rollout", "stage", "scores", "spans"}
    assert shown["rollout"]["rollout_id"] == "big-0" and shown["stage"]["lost_at"] == "nonzero_signal"
    assert [s["name"] for s in shown["scores"]] == ["unit_tests", "judge"]
    said = [m["content"] for s in shown["spans"] for m in s["messages"]]
    assert said == run.attempts["big-0"].texts
    turn = shown["spans"][0]
    assert {"kind", "turn_index", "input_tokens", "cached_input_tokens", "prefill_time_s", "messages"} <= set(
        turn
    )


def test_show_makes_terminal_escapes_visible(agent):
    store, _ = agent
    _, out, _ = rollscope("show", "--store", store, "--run", RUN, "--rollout", "hostile-0")
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[31mnot red in a terminal\\x1b[0m" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "nope", "--rollout", "x"], "rollscope: Unknown run: no run 'nope' in this store"),
        (["--run", RUN, "--rollout", "nope"], "rollscope: Unknown rollout: no rollout 'nope' in run 'agent'"),
    ],
)
def test_show_names_an_unknown_run_or_rollout_in_one_line(agent, args, message):
    code, out, err = rollscope("show", "--store", agent[0], *args)
    assert (code, out) == (1, "") and err.startswith(message) and err.count("\n") == 1


# --- the page -----------------------------------------------------------------------------------------------


def test_the_viewer_opens_a_rollout_from_its_address_as_a_conversation(agent):
    store, run = agent
    at = open_viewer(store, "s0-g0-0")
    assert at.selectbox(key="open-rollout").value == "s0-g0-0"
    drawn = shown_texts(at)
    for text in run.attempts["s0-g0-0"].texts:
        assert text is None or text in drawn
    headers = [m.value for m in at.markdown if m.value.startswith("**turn ")]
    assert len(headers) == 4 and headers[0].startswith("**turn 0 · 1,500 in (0 cached) · ")
    assert "speculative" in headers[0] and "prefill 300 ms" in headers[0]
    assert {"Status": "ok", "Reward": "1.00"}.items() <= {m.label: m.value for m in at.metric}.items()
    assert any(m.value == "Funnel: **usable**: it reached the trainer and counted." for m in at.markdown)
    assert "Scores: `unit_tests` **1.00** in 1.0 s · `judge` **1.00** in 2.0 s" in [
        m.value for m in at.markdown
    ]


def test_a_200_turn_rollout_is_drawn_a_page_of_turns_at_a_time(agent):
    at = open_viewer(agent[0], "long-0")
    pages = at.select_slider(key="turn-page:long-0")
    assert len(pages.options) == (LONG + 1 + conversation.TURNS_PER_PAGE - 1) // conversation.TURNS_PER_PAGE
    turns = [m.value for m in at.markdown if m.value.startswith("**turn ")]
    assert len(turns) == conversation.TURNS_PER_PAGE and turns[0].startswith("**turn 0 ·")
    pages.set_value(pages.options[-1]).run()
    turns = [m.value for m in at.markdown if m.value.startswith("**turn ")]
    assert turns[-1].startswith(f"**turn {LONG} ·") and len(turns) == (LONG + 1) % conversation.TURNS_PER_PAGE
    assert any(m.value.startswith("**judge") for m in at.markdown)  # the scoring after the last turn


def test_a_turns_continuity_and_compaction_marks_read_on_its_header():
    """The hook for issue 57's per-turn query: a turn that prefilled its history again, or starts from a
    compacted context, says so (the reason as the job's text, in a code span)."""
    import pandas as pd

    marks = pd.DataFrame(
        {
            "turn_index": [0, 1, 2],
            "continuity_break": [None, "re-rendered", None],
            "compaction_tokens_before": [None, None, 9000],
            "compaction_tokens_after": [None, None, 2000],
        }
    )
    assert conversation._marks(marks) == {
        1: "⟲ history prefilled again (`re-rendered`)",
        2: "✂ from a compacted context (9,000 → 2,000 tokens)",
    }
    assert conversation._marks(None) == {}


def test_a_cut_text_is_shown_whole_on_a_switch(agent):
    store, run = agent
    at = open_viewer(store, "big-0")
    log = run.attempts["big-0"].texts[4]
    assert not any(text == log for text in shown_texts(at))
    switch = next(t for t in at.toggle if t.label == "Whole text")
    switch.set_value(True).run()
    assert any(text == log[: conversation.WHOLE_CHARS] for text in shown_texts(at))
    assert any(
        f"the first {conversation.WHOLE_CHARS:,} of {len(log):,} characters" in c.value for c in at.caption
    )


def test_transcript_text_is_drawn_as_text_never_as_markup(agent):
    at = open_viewer(agent[0], "hostile-0")
    assert any(HOSTILE in text for text in shown_texts(at))
    for element in (*at.markdown, *at.caption, *at.warning, *at.info, *at.success):
        assert "<script" not in element.value and "onerror" not in element.value, element.value


def test_the_group_view_puts_attempts_side_by_side_and_diffs_two(agent, con):
    store, run = agent
    at = open_viewer(store, "s1-g0-2")
    at.segmented_control(key="rollout-view").set_value("Group").run()
    group = table(at, "advantage")
    assert sorted(group["rollout_id"]) == sorted(
        a.rollout_id for a in run.attempts.values() if a.group_id == "s1-g0"
    )
    assert group["open"].tolist() == [app_links.viewer(RUN, r) for r in group["rollout_id"]]
    best_first = sorted(group["rollout_id"], key=lambda r: -run.attempts[r].reward)
    assert at.multiselect(key="side-by-side").value == best_first  # a group of four: all of it
    a, b = at.selectbox(key="diff-a").value, at.selectbox(key="diff-b").value
    assert run.attempts[a].reward == 1.0 and run.attempts[b].reward == 0.0
    diff = next(c.value for c in at.code if c.language == "diff")
    assert diff.startswith(f"--- {a}\n+++ {b}\n")


def test_task_history_lists_the_tasks_attempts_with_links(agent, con):
    store, run = agent
    at = open_viewer(store, "s0-g0-0")
    at.segmented_control(key="rollout-view").set_value("Task history").run()
    shown = table(at, "outcome")
    assert shown["rollout_id"].tolist() == [a.rollout_id for a in run.of_task("calc-add")]
    assert shown["open"].iloc[0] == "./rollouts?run=agent&rollout=s0-g0-0"
    assert shown.set_index("rollout_id").loc["s0-g0-0", ""] == "▶"


def test_the_timeline_keeps_the_waterfall(agent):
    at = open_viewer(agent[0], "s0-g0-0")
    at.segmented_control(key="rollout-view").set_value("Timeline").run()
    assert [el for el in at.get("plotly_chart") if el.proto.id.endswith("-waterfall")]


def test_the_search_finds_rollouts_by_transcript_text_and_links_each(agent, con):
    at = open_viewer(agent[0], q="could not fix")
    hits = table(at, "snippet")
    assert hits["rollout_id"].tolist() == transcripts.search(con, RUN, "could not fix")["rollout_id"].tolist()
    assert hits["open"].tolist() == [app_links.viewer(RUN, r) for r in hits["rollout_id"]]
    assert at.selectbox(key="open-rollout").options == hits["rollout_id"].tolist()


def test_a_bad_regular_expression_is_said_on_the_page_which_goes_on(agent):
    at = app_test(APP, 120)
    at.session_state["store"] = str(agent[0])
    at.query_params.update({"run": RUN, "q": "(unclosed", "regex": "1"})
    at.run()
    at.switch_page("screens/rollouts.py").run()
    assert not at.exception and len(at.error) == 1 and "Transcript query failed" in at.error[0].value
    assert "No rollout matches these filters." in [i.value for i in at.info]


def test_a_funnel_loss_link_lists_its_rollouts(agent, con):
    at = open_viewer(agent[0], stage="nonzero_signal", reason="only scored attempt in its group")
    listed = table(at, "sample_decision")["rollout_id"]
    assert set(listed) == {"hostile-0", "long-0", "big-0"}


def test_a_long_runs_pages_link_each_figure_to_its_list_without_picking_examples(agent, monkeypatch, request):
    # a run of more rollouts than INLINE_ROLLOUTS (here: any) would read every rollout per figure on each render
    monkeypatch.setattr(examples, "INLINE_ROLLOUTS", 0)
    st.cache_data.clear()  # pages cache whether a run is small; here it is not, for this test alone
    request.addfinalizer(st.cache_data.clear)
    store, _ = agent
    pages = {}
    for page in ("funnel", "advisor"):
        at = app_test(APP, 120)
        at.session_state["store"] = str(store)
        at.query_params["run"] = RUN
        at.run()
        at.switch_page(f"screens/{page}.py").run()
        assert not at.exception
        pages[page] = "\n".join(e.value for e in (*at.markdown, *at.caption))
    assert (
        "- **nonzero signal · only scored attempt in its group**: 3 · Examples: [list the rollouts lost at "
        "nonzero signal (only scored attempt in its group)](./rollouts?run=agent&stage=nonzero_signal"
        "&reason=only+scored+attempt+in+its+group)"
    ) in pages["funnel"]
    assert app_links.listing_line(RUN, "lever:tool_waits", examples.LEVERS["tool_waits"]) in pages["advisor"]
    assert "list all" not in pages["funnel"] + pages["advisor"] and "[`" not in pages["funnel"]


def test_every_loss_check_and_lever_links_to_its_examples(agent, con):
    store, _ = agent
    pages = {}
    for page in ("funnel", "overview", "advisor"):
        at = app_test(APP, 120)
        at.session_state["store"] = str(store)
        at.query_params["run"] = RUN
        at.run()
        if page != "overview":
            at.switch_page(f"screens/{page}.py").run()
        assert not at.exception
        pages[page] = "\n".join(e.value for e in (*at.markdown, *at.caption))
    lost = examples.rollouts(con, RUN, examples.lost("nonzero_signal", "only scored attempt in its group"))
    for rollout_id in lost["rollout_id"]:
        assert f"[`{rollout_id}`]({app_links.viewer(RUN, rollout_id)})" in pages["funnel"]
    assert (
        "(3 of the 3 rollouts lost at nonzero signal (only scored attempt in its group))" in pages["funnel"]
    )
    # every check passes on this run: each links to its list, and no examples are picked for a passing check
    assert (
        "Examples: [list the rollouts lost at nonzero signal](./rollouts?run=agent&stage=nonzero_signal)"
        in pages["overview"]
    )
    lever = examples.rollouts(con, RUN, examples.LEVERS["tool_waits"])
    assert (
        f"[list all {lever['total'].iloc[0]}](./rollouts?run=agent&examples=lever%3Atool_waits)"
        in pages["advisor"]
    )
    listed = table(open_viewer(store, examples="lever:tool_waits"), "seconds in tools")
    assert len(listed) == lever["total"].iloc[0]
