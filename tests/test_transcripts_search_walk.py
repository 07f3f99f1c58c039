"""The text search's walk (queries/text_search.py: the newest row groups first, stopped once the newest `limit`
rollouts are known, their hits completed from the older row groups of their time) answers as search.sql reading
every message: same rows, order, hit counts and snippets, for every limit, with filters that leave few
rollouts, a limit larger than the matches, rollouts spanning row groups, ties on the last hit's time and a
message without a time. The run is written in row groups of a few messages, so every rollout spans several."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from benchmarks.fixtures.agent_runs import NS, write_agent_run
from rollscope.queries import text_index, text_search, transcripts
from rollscope.queries.reader import Reader
from rollscope.store import layout
from rollscope.store.schema import MESSAGES_SCHEMA

RUN = "agent"
ROWS = 8  # messages per row group
TIED = 4  # rollouts whose last hit is at the same instant, the run's latest
PATTERNS = [  # (pattern, regex)
    ("Tie Break", False),
    ("could not fix", False),
    ("pytest", False),
    (r"1[12] passed in 0\.(29|31)s", True),
    ("zebra crossing quantum", False),  # nowhere
    ("3 ", False),  # no trigram: every row group
    (None, False),  # the filters alone: every message is a hit
]
FILTERS = [  # each leaves some rollouts
    {"steps": (1, 2)},
    {"text": "s1-g0"},
    {"reward": (0.5, None)},
    {"lost_at": "usable"},
    {"finish_reason": "tool_calls"},
]
CASES = [(p, r, {}) for p, r in PATTERNS] + [(p, False, f) for f in FILTERS for p in ("pytest", None)]
LIMITS = [1, 3, 8, 1000]


@pytest.fixture(autouse=True)
def walk_it_all(monkeypatch):
    """The walk never hands over to search.sql (on a run this small it would, past a quarter of it)."""
    monkeypatch.setattr(text_search, "WALK_SHARE", math.inf)


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """A reader of the run, the rollouts with the tie (ordered by id), and one whose only hit has no time."""
    store = tmp_path_factory.mktemp("search-walk") / "store"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layout, "MESSAGE_ROW_GROUP_ROWS", ROWS)
        write_agent_run(store, RUN, steps=4)
        reader = Reader(store)
        times = reader.con.execute(
            "SELECT rollout_id, start_ns FROM rollouts WHERE run_id = ? ORDER BY rollout_id", [RUN]
        ).fetchall()
        tied = times[:TIED]
        latest = reader.con.execute("SELECT max(end_ns) FROM rollouts").fetchone()[0] + NS
        publish(store, [(r, at, f"tie break first, {r}") for r, at in tied])  # old row groups
        publish(store, [(r, latest, f"tie break last, {r}") for r, _ in tied])  # the newest
        untimed = times[-1][0]
        publish(
            store, [(untimed, None, "a tie break without a time"), (tied[1][0], None, "tie break, untimed")]
        )
    reader.refresh()
    return reader, [r for r, _ in tied], untimed


def publish(store, rows: list[tuple]) -> None:
    """A messages segment of (rollout id, start_ns, content) messages, published after the run's."""
    table = {f.name: pa.nulls(len(rows), f.type) for f in MESSAGES_SCHEMA}
    table.update(
        rollout_id=pa.array([r for r, _, _ in rows]),
        start_ns=pa.array([at for _, at, _ in rows], pa.int64()),
        content=pa.array([text for _, _, text in rows]),
        role=pa.array(["assistant"] * len(rows)),
        turn_index=pa.array([50 + i for i in range(len(rows))]),
        span_id=pa.array([7_000 + i for i in range(len(rows))], pa.uint64()),
        ordinal=pa.array([0] * len(rows)),
    )
    layout.SegmentWriter(store, "messages").publish(RUN, pa.table(table, schema=MESSAGES_SCHEMA))


@pytest.mark.parametrize(
    ("pattern", "regex", "filters"), CASES, ids=[f"{p}-{','.join(f) or 'all'}" for p, _, f in CASES]
)
def test_the_walk_answers_as_search_sql(walked, pattern, regex, filters):
    con = walked[0].con
    for limit in LIMITS:
        plain = transcripts.search(con, RUN, pattern, regex=regex, limit=limit, walk=False, **filters)
        walk = transcripts.search(con, RUN, pattern, regex=regex, limit=limit, **filters)
        assert walk.equals(plain), (limit, walk, plain)
    assert not plain.empty or pattern == "zebra crossing quantum"


def test_rollouts_tied_on_their_last_hit_come_by_id_with_their_first_hit(walked):
    """The tied rollouts' first hits are in old row groups the walk reads only for them; a hit without a time
    counts, is never a first hit before a timed one, and a rollout whose hits have no time ranks last."""
    reader, tied, untimed = walked
    for limit in range(1, TIED + 2):
        found = transcripts.search(reader.con, RUN, "tie break", limit=limit)
        assert found.equals(transcripts.search(reader.con, RUN, "tie break", limit=limit, walk=False))
        assert found["rollout_id"].tolist() == [*tied, untimed][:limit]
        assert found["snippet"].tolist()[:TIED] == [f"tie break first, {r}" for r in tied[:limit]]
        assert found["hits"].tolist() == [2, 3, 2, 2, 1][:limit]


def test_a_common_phrase_reads_the_newest_row_groups_alone(walked, monkeypatch):
    con, read = walked[0].con, []
    reading = text_index.read
    monkeypatch.setattr(text_index, "read", lambda blocks: read.extend(blocks) or reading(blocks))
    found = transcripts.search(con, RUN, "pytest", limit=2)
    assert len(found) == 2
    every = text_index.candidates(con, RUN, "pytest", False)[0]
    assert 0 < len(read) < len(every) / 2


@pytest.mark.parametrize(("pattern", "limit"), [("pytest", 1000), (None, 1000), ("pytest", 2)])
def test_a_walk_that_would_read_most_of_the_run_hands_it_to_search_sql(walked, monkeypatch, pattern, limit):
    con, read = walked[0].con, []
    reading = text_index.read
    monkeypatch.setattr(text_index, "read", lambda blocks: read.extend(blocks) or reading(blocks))
    monkeypatch.setattr(text_search, "WALK_SHARE", 0.1)
    found = transcripts.search(con, RUN, pattern, limit=limit)
    assert found.equals(transcripts.search(con, RUN, pattern, limit=limit, walk=False))
    rows = sum(b.rows for b in text_index.candidates(con, RUN, pattern, False)[0])
    assert sum(b.rows for b in read) < 0.1 * rows + 2 * text_search.MAX_BATCH * ROWS
