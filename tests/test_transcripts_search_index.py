"""Text search through the trigram sidecars (store.text_index, queries.text_index): the same rows, order and
snippets as the search reading every message, found by the texts the agent run wrote (the ground truth), with
regular expressions, patterns with no trigram, segments that arrive after the sidecars were built, and a store
the search cannot write into."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from benchmarks.fixtures.agent_runs import write_agent_run
from rollscope.queries import text_index, transcripts
from rollscope.queries.reader import Reader
from rollscope.store import layout
from rollscope.store import text_index as sidecars
from rollscope.store.schema import MESSAGES_SCHEMA

RUN = "agent"
CASES = [  # (pattern, regex, what a matching text holds)
    ("ASSERT 3 == 4", False, lambda t: "assert 3 == 4" in t.lower()),
    ("could not fix", False, lambda t: "could not fix" in t.lower()),
    (r"1[12] passed in 0\.(29|31)s", True, lambda t: re.search(r"1[12] passed in 0\.(29|31)s", t)),
    (r"(?i)COULD not (fix|mend)", True, lambda t: re.search(r"could not (fix|mend)", t, re.I)),
    ("3 ", False, lambda t: "3 " in t),  # no trigram: every row group
    (r"\d\d\d", True, lambda t: re.search(r"\d\d\d", t)),  # no literal run: every row group
]


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    store = tmp_path_factory.mktemp("search-index") / "store"
    # Every search here may build every sidecar it lacks: on a loaded machine the 2 s budget can run out between
    # two segments (the budget has its own test: test_a_search_out_of_building_time_...).
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(text_index, "BUILD_BUDGET_S", 600.0)
        yield store, write_agent_run(store, RUN)


def searched(con, pattern, regex, walk: bool) -> object:
    """The search through the sidecars (``walk``), or search.sql reading every message."""
    return transcripts.search(con, RUN, pattern, regex=regex, walk=walk)


def expected(run, matches) -> set[str]:
    return {a.rollout_id for a in run.attempts.values() if any(t and matches(t) for t in a.texts)}


@pytest.mark.parametrize(("pattern", "regex", "matches"), CASES, ids=[c[0] for c in CASES])
def test_the_sidecars_leave_the_answer_as_it_was(agent, pattern, regex, matches):
    store, run = agent
    con = Reader(store).con
    through = searched(con, pattern, regex, True)
    assert through.equals(searched(con, pattern, regex, False))  # every message read
    assert set(through["rollout_id"]) == expected(run, matches)
    if text_index.required(con, pattern, regex) is not None:  # a pattern with trigrams has them built
        assert all(sidecars.load(s) is not None for s in text_index.segments(con, RUN))


def test_a_phrase_said_nowhere_reads_no_row_group(agent):
    con = Reader(agent[0]).con
    assert text_index.candidates(con, RUN, "zebra crossing quantum", False)[0] == []
    every = sum(len(sidecars.row_groups(s)) for s in text_index.segments(con, RUN))
    assert len(text_index.candidates(con, RUN, "ab", False)[0]) == every > 0  # no trigram: every row group


def needle_segment(store, rollout_id: str, text: str) -> None:
    """A messages segment of one message, published after the others (a live run's next batch)."""
    row = {f.name: pa.nulls(1, f.type) for f in MESSAGES_SCHEMA}
    row.update(
        rollout_id=pa.array([rollout_id]),
        content=pa.array([text]),
        role=pa.array(["assistant"]),
        turn_index=pa.array([99]),
        start_ns=pa.array([2**62]),
        span_id=pa.array([1], pa.uint64()),
        ordinal=pa.array([0]),
    )
    layout.SegmentWriter(store, "messages").publish(RUN, pa.table(row, schema=MESSAGES_SCHEMA))


def test_segments_that_arrive_after_the_sidecars_are_searched_too(tmp_path):
    store = tmp_path / "store"
    run = write_agent_run(store, RUN)
    reader = Reader(store)
    assert searched(reader.con, "flux capacitor", False, True).empty  # every segment has its sidecar now
    rollout = next(iter(run.attempts))
    needle_segment(store, rollout, "The Flux Capacitor overheated")
    reader.refresh()
    found = searched(reader.con, "flux capacitor", False, True)
    assert found["rollout_id"].tolist() == [rollout] and found["snippet"].tolist() == [
        "The Flux Capacitor overheated"
    ]
    assert found.equals(searched(reader.con, "flux capacitor", False, False))
    assert searched(reader.con, r"capacitor (overheated|melted)", True, True)["rollout_id"].tolist() == [
        rollout
    ]


def test_a_store_the_search_cannot_write_into_keeps_its_sidecars_in_the_cache(tmp_path, monkeypatch):
    store = tmp_path / "store"
    run = write_agent_run(store, RUN)
    monkeypatch.setenv("ROLLSCOPE_CACHE", str(tmp_path / "cache"))
    for partition in (store / "messages").iterdir():  # a file where the sidecars' folder would be: not
        (partition / sidecars.INDEX_DIR).write_text(
            ""
        )  # writable, whoever runs the test (root ignores modes)
    con = Reader(store).con
    found = searched(con, "could not fix", False, True)
    assert set(found["rollout_id"]) == expected(run, lambda t: "could not fix" in t.lower()) != set()
    assert list((tmp_path / "cache").rglob("*.parquet.npy"))
    assert found.equals(searched(con, "could not fix", False, False))


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("pytset: command not found", ["pyt", "et: command not found"]),
        (r"1[12] passed in 0\.(29|31)s", ["1", " pa", "ed in 0"]),
        (r"ab*cd+e?", ["a", "cd"]),
        (r"foo|bar", None),
        (r"(foo|bar)baz", ["baz"]),
        (r"\x41BC\p{Greek}xyz", []),  # what follows \x or \p may be its argument: left out
        (r"test\.py::run", ["te", "t", "py::run"]),
        (r"a{2,3}bcd", ["bcd"]),
        (r"[]a|b]cde", ["cde"]),
        (r"\Qa.b\E", None),
    ],
)
def test_a_regular_expressions_literal_runs_are_what_every_match_holds(pattern, literals):
    assert text_index.regex_literals(pattern) == literals


def test_the_prefilter_passes_every_text_lower_maps_onto_the_pattern(agent):
    con = Reader(agent[0]).con
    for text, pattern in [("\u212aelvin", "kelvin"), ("\u0130stanbul", "istanbul"), ("FOO.bar", "o.B")]:
        assert con.execute("SELECT contains(lower(?), lower(?))", [text, pattern]).fetchall() == [(True,)]
        expression = text_index.prefilter(con, pattern)
        assert con.execute("SELECT regexp_matches(?, ?)", [text, expression]).fetchall() == [(True,)]
    assert con.execute("SELECT regexp_matches('x.y', ?)", [text_index.prefilter(con, "o.B")]).fetchall() == [
        (False,)
    ]


def test_a_search_out_of_building_time_reads_the_unindexed_segments_whole_and_derive_indexes_them(
    tmp_path, monkeypatch
):
    """A first search on a big run must not wait for its sidecars: past its budget it reads the rest whole, and
    `rollscope derive` (a first open's work, done ahead) builds them."""
    from tests.conftest import rollscope

    store = tmp_path / "store"
    run = write_agent_run(store, RUN)
    con = Reader(store).con
    monkeypatch.setattr(text_index, "BUILD_BUDGET_S", 0.0)
    hurried = searched(con, "could not fix", False, True)
    assert not any(sidecars.load(s) for s in text_index.segments(con, RUN))  # nothing built
    assert set(hurried["rollout_id"]) == expected(run, lambda t: "could not fix" in t.lower())
    code, out, err = rollscope("derive", "--store", store, "--run", RUN)
    assert (code, err) == (0, "") and "search index of " in out, out
    assert all(sidecars.load(s) for s in text_index.segments(con, RUN))
    assert searched(con, "could not fix", False, True).equals(hurried)
    assert (
        "search index" not in rollscope("derive", "--store", store, "--run", RUN)[1]
    )  # nothing left to build
