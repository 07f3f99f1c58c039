"""A run's full derivation in pieces of consecutive steps derives what one piece of the whole run does.

Each piece reads the traces of the rollouts its steps consumed and of their groups' members
(``queries/pieces.py``); the pending piece the rollouts no step consumed, those in flight and the spans of no
rollout. Runs here are cut a step per block and a few hundred spans per piece, so every run is many pieces,
groups straddle them, and most parts get rows from several pieces: every table must equal the one-piece
derivation's (``tests/test_reader_incremental.py``'s comparison of every table).
"""

from __future__ import annotations

import pytest

from benchmarks.fixtures.derived_rows import derived
from rollscope.queries import Reader, derive_db, derived_schemas, parquet_parts, pieces, refresh
from rollscope.queries.tables import TABLES
from rollscope.store import derived as store_derived
from rollscope.store.derived import part_range
from tests.simulated_runs import simulated
from tests.test_reader_incremental import fresh, opened


@pytest.fixture
def split(monkeypatch):
    """Cut every run into pieces of ~300 spans, one step per block; returns the pieces derived so far."""
    derived_pieces = []
    original = pieces.derive_piece

    def counted(plan, piece, con=None, progress=None):
        derived_pieces.append(piece)
        return original(plan, piece, con, progress)

    monkeypatch.setattr(store_derived, "BLOCK_STEPS", 1)
    monkeypatch.setattr(pieces, "SPLIT_SPANS", 0)
    monkeypatch.setattr(pieces, "PIECE_SPANS", 300)
    monkeypatch.setattr(pieces, "derive_piece", counted)
    return derived_pieces


def whole(store, run: str, monkeypatch) -> dict:
    """Every table of a one-piece derivation of a fresh copy of the store (a step per block too)."""
    with monkeypatch.context() as m:
        m.setattr(pieces, "SPLIT_SPANS", 10**12)
        m.setattr(store_derived, "BLOCK_STEPS", 1)
        return derived(fresh(store), run)


@pytest.mark.long
@pytest.mark.parametrize("name", ["samples", "derived", "stall"])
def test_a_run_derived_in_pieces_holds_what_one_piece_derives(name, split, monkeypatch):
    store, _ = simulated(name)
    expected = whole(store, name, monkeypatch)

    reader = fresh(store)

    assert len(split) > 4 and any(p.blocks == ("p",) for p in split), split
    assert reader.derived_how == {"full": 1}
    assert derived(reader, name) == expected


@pytest.mark.long  # derives a run whole and in pieces: ~20 CPU-seconds
def test_groups_that_straddle_pieces_are_judged_whole(tmp_path, split, monkeypatch):
    """Groups consumed over several train steps, judges and a teacher in the rollout workers' process, workers
    idle between steps: the pieces' groups and step windows are the whole run's."""
    run, store = "straddle", tmp_path / "store"
    writer, _ = opened(store, run, seed=3, steps=12)
    writer.shutdown()
    expected = whole(store, run, monkeypatch)
    split.clear()

    assert derived(fresh(store), run) == expected
    assert len(split) > 4


@pytest.mark.long
def test_a_piece_layout_is_what_consolidation_would_leave(split):
    """Each blocked table's parts are the fixed point of the consolidation: the next catch-up merges none."""
    store, _ = simulated("derived")
    reader = fresh(store)
    state = store_derived.current(reader.store, "derived")
    for table in TABLES:
        ranges = sorted(r for p in state.files()[table.name] if (r := part_range(p)) is not None)
        assert not parquet_parts.merge_groups(ranges), (table.name, ranges)
        assert len(ranges) == len(set(ranges)), table.name  # one part per range


@pytest.mark.long
def test_the_stages_run_apart_as_tasks_elsewhere_would(tmp_path, split, monkeypatch):
    """The plan, each piece and the finish in databases of their own, handing each other only the plan and
    the pieces' outputs (what a scheduler on other machines sharing the store does)."""
    store, _ = simulated("samples")
    expected = whole(store, "samples", monkeypatch)

    def apart(job: store_derived.Job) -> store_derived.Result:
        schemas = derived_schemas.shipped()
        with derive_db.connection(job.staging, schemas) as con:
            plan = pieces.plan(con, job)
        outputs = [pieces.derive_piece(plan, piece) for piece in reversed(plan.pieces)]
        with derive_db.connection(job.staging, schemas) as con:
            return pieces.finish(con, job, plan, outputs)

    copy = fresh(store).store
    store_derived.delete_run(copy, "samples")
    state, how = store_derived.catch_up(copy, "samples", apart)

    assert how == "derived" and state.how == "full"
    assert derived(Reader(copy, derive=False), "samples") == expected


@pytest.mark.long
def test_a_first_open_on_the_command_line_shows_its_progress_on_stderr_only(tmp_path):
    """`rollscope report` derives a run on its first open: asked (--progress) with stderr piped, it draws the
    derivation's bar there, and stdout holds the report alone; not asked and not a terminal, stderr stays
    empty."""
    import shutil
    import subprocess
    import sys

    store, _ = simulated("samples")
    for asked in (True, False):
        copy = tmp_path / f"asked-{asked}"
        shutil.copytree(store / "spans", copy / "spans")
        command = [sys.executable, "-m", "rollscope.app.cli", "report", "--store", str(copy), "--json"]
        done = subprocess.run(command + ["--progress"] * asked, capture_output=True, text=True, check=True)
        assert done.stdout.lstrip().startswith("{") and "deriving" not in done.stdout
        if asked:
            assert "deriving run samples [" in done.stderr and "100% done" in done.stderr, done.stderr
        else:
            assert done.stderr == "", done.stderr


@pytest.mark.long
@pytest.mark.parametrize(
    ("changed", "how"),
    [(("funnel_sums", "run_percentiles"), "tables"), (("turns",), "full")],
    ids=["derived-from-derived", "read-from-spans"],
)
def test_a_changed_definition_derives_again_only_the_tables_it_changes(changed, how, monkeypatch):
    """A state derived by other definitions (a new rollscope): a table that reads only derived tables is
    derived again from them, every other part kept as it was; one that reads spans makes a full derivation.
    Either way every table equals a fresh derivation's."""
    from rollscope.queries import definitions

    store, _ = simulated("derived")
    reader = fresh(store)
    before = store_derived.current(reader.store, "derived")
    digests = dict(definitions.digests())
    monkeypatch.setattr(definitions, "digests", lambda: {**digests, **{t: "changed" for t in changed}})

    again = Reader(reader.store)

    assert again.derived_how == {how: 1}
    after = store_derived.current(reader.store, "derived")
    assert after.meta["definitions"] == definitions.digests()
    if how == "tables":
        kept = {t for t in after.tables if after.tables[t] == before.tables[t]}
        assert kept == set(before.tables) - {*changed, refresh.WINDOWS}, set(before.tables) - kept
    assert derived(again, "derived") == derived(fresh(store), "derived")
