"""The derived tables a reader reads from the store stay equal to a from-scratch derivation as a run grows.

A live run's spans arrive in any order: a turn before its rollout, a reward or an rl.sample long after it,
a vLLM request before the rollout whose trace it joins, a compaction in between. Whatever the order, a reader
that refreshed after every segment must hold exactly what a reader of a fresh copy of the raw segments
(no derived state) derives from scratch.
"""

from __future__ import annotations

import json
import random
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks.fixtures.derived_rows import DERIVED, derived
from benchmarks.fixtures.seeded_runs import RunWriter
from rollscope.queries import Reader, parquet_parts, refresh
from rollscope.queries.analyses import compute_terms, scoring_latency
from rollscope.queries.tables import TABLES
from rollscope.store import derived as store_derived
from rollscope.store.layout import SegmentWriter, compact, segments
from tests.simulated_runs import simulated


def fresh(store) -> Reader:
    """A reader of a copy of the store's raw segments alone: its derived tables are derived from scratch."""
    copy = store.parent / f"fresh-{random.randrange(10**9)}"
    for dataset in ("spans", "collector_stats"):  # what the live readers here replay: no messages
        if (store / dataset).is_dir():
            shutil.copytree(store / dataset, copy / dataset)
    copy.mkdir(exist_ok=True)
    return Reader(copy)


def opened(store, run: str, *, seed: int, steps: int, groups: int = 4) -> tuple[RunWriter, Reader]:
    """A run of ``steps`` steps written as its processes write it, and a reader that derived it in full."""
    writer = RunWriter(store, run, seed=seed)
    for _ in range(steps):
        writer.write_step(groups=groups)
    writer.flush()
    return writer, Reader(store, run_id=run)


def forget(store, run: str, table: str) -> None:
    """Make the run's derived state one from before ``table`` was kept: its manifest no longer names it."""
    manifest = store_derived.current(store, run).root / store_derived.MANIFEST
    state = json.loads(manifest.read_text())
    del state["tables"][table]
    manifest.write_text(json.dumps(state))


def stored_spans(store, run: str) -> pa.Table:
    return pa.concat_tables(
        [pq.read_table(p) for p in segments(store, "spans", run)], promote_options="default"
    )


def replay_shuffled(spans: pa.Table, run: str, target, *, pieces: int, seed: int, compact_at: int):
    """Publish the spans into ``target`` in random order and random-sized segments, refreshing a live reader
    after each; the trainer's steps arrive together halfway, after most of the rollouts they consumed, and a
    compaction runs before piece ``compact_at``. Every few refreshes the live reader must hold what a fresh
    one derives at that moment."""
    rng = random.Random(seed)
    is_step = pc.equal(spans["name"], "rl.train_step")
    rest = spans.filter(pc.invert(is_step))
    order = list(range(rest.num_rows))
    rng.shuffle(order)
    cuts = sorted(rng.sample(range(1, rest.num_rows), pieces - 1))
    batches = [rest.take(order[lo:hi]) for lo, hi in zip([0, *cuts], [*cuts, rest.num_rows], strict=True)]
    batches.insert(pieces // 2, spans.filter(is_step))
    writer = SegmentWriter(target)
    live = Reader(target, materialize=True)
    for i, batch in enumerate(batches):
        if i == compact_at:
            compact(target, grace_seconds=0)
            before = sum(live.derivations.values())
            live.refresh()
            assert sum(live.derivations.values()) == before  # a compaction changed no row: nothing re-derived
        writer.publish(run, batch)
        live.refresh()
        if i % 5 == 0 or i in (pieces // 2, len(batches) - 1):
            assert derived(live, run) == derived(fresh(target), run), f"after piece {i}"
    return live


@pytest.mark.slow  # ~55 s each, ~3 min with a block per step: a catch-up per shuffled batch (make test-slow)
@pytest.mark.timeout(900)
@pytest.mark.parametrize("blocks", [None, 1], ids=["default-blocks", "a-block-per-step"])
@pytest.mark.parametrize("name", ["samples", "derived"])
def test_a_live_reader_derives_what_a_fresh_one_does_whatever_order_spans_arrive_in(
    name, blocks, tmp_path, monkeypatch
):
    """With a block per step, the 12-step runs keep parts merged from several blocks (b=0_7) that catch-ups
    rewrite as rollouts move between steps."""
    if blocks is not None:
        monkeypatch.setattr(store_derived, "BLOCK_STEPS", blocks)
    source, _ = simulated(name)
    live = replay_shuffled(stored_spans(source, name), name, tmp_path, pieces=16, seed=3, compact_at=10)

    assert live.derivations["derived"] == 17  # every new segment, none for the compaction
    # After the first, each catch-up re-derived only what the new segment could change (the train steps'
    # segment, as large as the run so far, and its switch to recorded decisions may take the full path).
    assert live.derived_how["incremental"] >= 14, live.derived_how
    if blocks is not None:
        parts = store_derived.current(tmp_path, name).files()["rollout_steps"]
        assert any("_" in store_derived.part_block(p) for p in parts), parts  # merged parts were rewritten
    assert derived(live, name) == derived(fresh(source), name)


@pytest.mark.long  # catches a run up step by step: ~12 CPU-seconds
def test_a_catch_up_where_groups_span_steps_and_workers_pause_rewrites_only_the_new_steps(
    tmp_path, monkeypatch
):
    """A group's attempts consumed over three train steps, a judge and a teacher sharing the rollout workers'
    process, and rollout workers idle between steps (their last turn ends before the next step's window does).
    Each new step is caught up incrementally, leaves the parts of earlier steps as they were (a group of a new
    step reaches two steps back, not over the whole run) and derives what a fresh reader does: goodput's step
    windows, busy islands of calls that start and end together, each process's role."""
    monkeypatch.setattr(store_derived, "BLOCK_STEPS", 1)
    run, store = "straddle", tmp_path / "store"
    writer, live = opened(store, run, seed=3, steps=10)
    first = store_derived.current(store, run).files()["rollout_steps"]
    for _ in range(2):
        writer.write_step(groups=4)
        writer.flush()
        live.refresh()
    writer.shutdown()
    live.refresh()

    assert live.derived_how == {"full": 1, "incremental": 2}, live.derived_how
    kept = set(store_derived.current(store, run).files()["rollout_steps"])
    early = [p for p in first if (blocks := store_derived.part_range(p)) is not None and blocks[1] <= 7]
    assert early and set(early) <= kept, (early, sorted(kept))
    assert derived(live, run) == derived(fresh(store), run)


def _percentiles(reader: Reader, run: str) -> list[tuple]:
    return reader.con.execute("SELECT * FROM _run_percentiles($run) ORDER BY ALL", {"run": run}).fetchall()


def _windows(store, run: str) -> list[tuple]:
    """Each kept window's bounds (lo, hi: NULL when it holds every value on that side) and distinct values."""
    files = [str(p) for p in store_derived.current(store, run).files()[refresh.WINDOWS]]
    return pq.read_table(files, columns=["lo", "hi", "window_values"]).to_pylist()


@pytest.mark.parametrize(
    "window, catch_ups, read_from",
    [(16, 3, "windows"), (3, 1, "every value")],
    ids=["percentiles-stay-in-their-windows", "percentiles-leave-their-windows"],
)
@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_catch_up_keeps_the_runs_exact_percentiles_from_the_values_it_adds_and_removes(
    window, catch_ups, read_from, tmp_path, monkeypatch
):
    """The run percentiles of throughput, disaggregation and scoring latency (p50/p90/p99 of rollout tokens and
    seconds, median turn latency, p50/p99 of verifier and judge calls; per environment and over all) are exact.
    A catch-up takes them from windows of the values next to each, moved by the values it adds and removes,
    and over every value again only when one leaves its window: both ways equal a fresh derivation to the last
    bit, and a window stays its size."""
    monkeypatch.setattr(refresh, "WINDOW_VALUES", window)
    run, store = "tails", tmp_path / "store"
    writer, live = opened(store, run, seed=5, steps=6)
    for _ in range(catch_ups):
        writer.write_step(groups=4)
        writer.flush()
        live.refresh()
        assert store_derived.current(store, run).meta["quantiles"] == read_from

    assert live.derived_how == {"full": 1, "incremental": catch_ups}, live.derived_how
    assert _percentiles(live, run) == _percentiles(fresh(store), run)
    windows = _windows(store, run)
    assert all(w["lo"] is not None for w in windows)  # none holds every value below its percentile
    assert any(w["hi"] is not None for w in windows)
    assert max(len(w["window_values"]) for w in windows) <= 2 * window + 1  # trimmed as they move
    # the run's scoring latency, read from them, is quantile_cont over every call
    for environment in (None, "math", "swe"):
        calls = live.con.execute(
            "SELECT kind, quantile_cont(duration_s, [0.5, 0.99]) FROM _scoring($run) "
            "WHERE $environment IS NULL OR environment = $environment GROUP BY kind",
            {"run": run, "environment": environment},
        ).fetchall()
        frame = scoring_latency(live.cursor(), run, by=None, environment=environment)
        assert {row.kind: [row.p50_s, row.p99_s] for row in frame.itertuples()} == dict(calls)


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_state_without_percentile_windows_takes_them_on_its_next_catch_up(tmp_path):
    """A store derived before the windows existed still catches up incrementally: it takes them once, over
    every value, and reads its percentiles from them after, an environment's first values included (a window
    of their own, not every value again)."""
    run, store = "tails", tmp_path / "store"
    writer, live = opened(store, run, seed=5, steps=4, groups=1)  # one environment
    forget(store, run, refresh.WINDOWS)
    seen = []
    for groups in (1, 2):  # then a second environment's first rollouts
        writer.write_step(groups=groups)
        writer.flush()
        live.refresh()
        seen.append(store_derived.current(store, run).meta["quantiles"])

    assert seen == ["every value", "windows"]
    assert live.derived_how == {"full": 1, "incremental": 2}, live.derived_how
    assert _percentiles(live, run) == _percentiles(fresh(store), run)


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_state_whose_index_was_not_kept_by_key_catches_up_and_keeps_it_so(tmp_path):
    """A store derived before the trace index was looked up by key (no ``_trace_keys``, its index parts in no
    order) still catches up incrementally: the first catch-up writes the index sorted, with its keys, and
    every catch-up after looks it up by key. Both equal a fresh derivation."""
    run, store = "keyed", tmp_path / "store"
    writer, live = opened(store, run, seed=7, steps=4)
    forget(store, run, "_trace_keys")
    for _ in range(2):
        writer.write_step(groups=4)
        writer.flush()
        live.refresh()

    assert live.derived_how == {"full": 1, "incremental": 2}, live.derived_how
    assert derived(live, run) == derived(fresh(store), run)
    files = store_derived.current(store, run).files()
    for name, key in parquet_parts.KEYED.items():
        parts = [pq.read_table(p, columns=[key])[key].to_pylist() for p in files[name]]
        assert parts and all(keys == sorted(keys) for keys in parts), name  # each part sorted by its key
    keys = pa.concat_tables(pq.read_table(p) for p in files["_trace_keys"])
    rollouts = live.con.execute("SELECT rollout_id FROM rollouts WHERE run_id = $run", {"run": run})
    assert set(keys["key"].to_pylist()) >= {r for (r,) in rollouts.fetchall()}


@pytest.mark.slow  # ~20 s each (make test-slow; CI runs it)
@pytest.mark.parametrize("rollouts_last", [True, False], ids=["requests-first", "rollouts-first"])
def test_a_vllm_request_joins_its_rollout_whichever_arrives_first(rollouts_last, attached, store, tmp_path):
    rl = attached()
    for i in range(3):
        with rl.rollout(f"r-{i}", environment="swe", group_id="g"):
            with rl.turn(0, input_tokens=10, output_tokens=5):
                pass
            with rl.tracer.start_as_current_span("llm_request", attributes={"gen_ai.usage.input_tokens": 7}):
                pass
    rl.force_flush()
    spans = stored_spans(store, "exp-7")
    # Every span in its own segment, the rollout spans last or first.
    order = sorted(
        range(spans.num_rows), key=lambda i: (spans["name"][i].as_py() == "rl.rollout") == rollouts_last
    )
    writer, live = SegmentWriter(tmp_path), Reader(tmp_path, materialize=True)
    for i in order:
        writer.publish("exp-7", spans.take([i]))
        live.refresh()

    requests = live.con.execute(
        "SELECT rollout_id, environment FROM turns WHERE name = 'llm_request' ORDER BY rollout_id"
    ).fetchall()
    assert requests == [("r-0", "swe"), ("r-1", "swe"), ("r-2", "swe")]
    assert derived(live, "exp-7") == derived(fresh(tmp_path), "exp-7")


@pytest.mark.long  # 5 to 18 CPU-seconds: `make test-all` runs it
def test_a_second_rollout_in_a_trace_unlinks_the_request_that_joined_the_first(attached, store, tmp_path):
    """A span without rl.rollout.id joins the one rollout of its trace; once a trace holds two, it joins none."""
    rl = attached()
    with rl.tracer.start_as_current_span("episode"):
        with (
            rl.rollout("x", group_id="g"),
            rl.tracer.start_as_current_span("llm_request", attributes={"gen_ai.usage.output_tokens": 9}),
        ):
            pass
        with rl.rollout("z", group_id="h"):
            pass
    rl.force_flush()
    spans = stored_spans(store, "exp-7")
    is_z = pc.fill_null(pc.equal(spans["rollout_id"], "z"), False)
    writer, live = SegmentWriter(tmp_path), Reader(tmp_path, materialize=True)
    writer.publish("exp-7", spans.filter(pc.invert(is_z)))
    live.refresh()
    assert live.con.execute("SELECT rollout_id, generated FROM _rollout_work('exp-7')").fetchall() == [
        ("x", 9)
    ]

    writer.publish("exp-7", spans.filter(is_z))
    live.refresh()

    assert live.con.execute("SELECT rollout_id FROM turns").fetchall() == [(None,)]
    assert derived(live, "exp-7") == derived(fresh(tmp_path), "exp-7")


S = 1_000_000_000  # ns per second


@pytest.fixture
def step_blocks(monkeypatch):
    """One consuming step per block (``ROLLSCOPE_BLOCK_STEPS=1``): a run of a dozen steps then has parts
    merged from several blocks (b=<first>_<last>), as a long run has with the default blocks."""
    monkeypatch.setattr(store_derived, "BLOCK_STEPS", 1)


@pytest.mark.long  # ~17 CPU-seconds: `make test-all` runs it
def test_a_group_that_moves_to_a_later_step_leaves_the_earlier_steps_compute(attached, store, step_blocks):
    """No rl.sample spans: a group counts at the first train step after its last rollout ended, so a late
    group member moves the whole group, and its work, to a later step: out of the part merged from the
    first blocks, into a part of its own."""
    # two processes, as a real run has (one per role; in one test process they would share an instance id)
    rollouts = attached(
        role="rollout",
        devices=4,
        model_parameters=1e9,
        resource_attributes={"service.instance.id": "rollout-0"},
    )
    trainer = attached(
        role="train",
        devices=8,
        model_parameters=1e9,
        resource_attributes={"service.instance.id": "trainer-0"},
    )
    live = Reader(store, materialize=True)
    for step in range(12):  # one rollout consumed per step, each at the first step after it ended
        start = 10 * step
        with (
            rollouts.rollout(
                f"r{step}",
                group_id="g" if step == 0 else f"g{step}",
                start_time=start * S,
                end_time=(start + 10) * S,
            ),
            rollouts.turn(
                0, input_tokens=100, output_tokens=50, start_time=(start + 1) * S, end_time=(start + 9) * S
            ),
        ):
            pass
        with trainer.train_step(
            step, train_tokens=10, start_time=(start + 12) * S, end_time=(start + 17) * S
        ):
            pass
    rollouts.force_flush(), trainer.force_flush()
    live.refresh()
    assert _by_step(live)[0, "rollout"] == 8.0 * 4  # r0's turn, consumed by step 0
    merged = {
        store_derived.part_block(p) for p in store_derived.current(store, "exp-7").files()["rollout_steps"]
    }
    assert "0_7" in merged  # r0's rows are in a part merged from the first eight blocks

    with (
        rollouts.rollout("late", group_id="g", start_time=5 * S, end_time=100 * S),
        rollouts.turn(0, input_tokens=100, output_tokens=50, start_time=6 * S, end_time=99 * S),
    ):
        pass
    rollouts.force_flush()
    live.refresh()

    assert live.derived_how["incremental"] == 1
    by_step = _by_step(live)
    # the group moved to step 9, the first to start (at 102 s) after its late member ended; its turns keep
    # the process busy from 1 s to 99 s
    assert (by_step[0, "rollout"], by_step[9, "rollout"]) == (0.0, (99 - 1) * 4.0)
    assert derived(live, "exp-7") == derived(fresh(store), "exp-7")


@pytest.mark.long  # ~10 CPU-seconds: `make test-all` runs it
def test_a_train_step_that_consumed_nothing_yet_still_counts_at_its_step(attached, store):
    rollouts = attached(role="rollout", devices=4, model_parameters=1e9)
    trainer = attached(role="train", devices=8, model_parameters=1e9)
    live = Reader(store, materialize=True)
    with rollouts.rollout("a", group_id="g", start_time=0, end_time=10 * S):
        pass
    with (
        trainer.sample("a", 0, "used"),
        trainer.train_step(0, train_tokens=10, start_time=12 * S, end_time=17 * S),
    ):
        pass
    rollouts.force_flush(), trainer.force_flush()
    live.refresh()
    with trainer.train_step(1, train_tokens=10, start_time=20 * S, end_time=22 * S):
        pass
    trainer.force_flush()
    live.refresh()

    assert live.derivations["derived"] == 2
    assert _by_step(live)[1, "train"] == 2.0 * 8
    assert _by_step(live) == _by_step(fresh(store))


def _by_step(reader: Reader) -> dict[tuple, float]:
    """Device-seconds per (step, term) as the Compute page shows them."""
    frame = compute_terms(reader.con, "exp-7", by="step")
    return {(r.step, r.term): r.device_seconds for r in frame.itertuples()}


def test_the_comparison_covers_every_derived_table():
    """A table added to queries/tables.py must be compared above too (some under their analyses' names)."""
    from rollscope.queries.tables import TABLES

    named = {"compute work": "work", "rollout work": "rollout_work", "busy islands": "step_islands"}
    compared = {named.get(key, key.replace(" ", "_")) for key in DERIVED}
    assert compared == {t.name for t in TABLES}


def publish_rollout(rl, i: int) -> None:
    """One small rollout (two to a group) published as a segment of its own."""
    with (
        rl.rollout(f"r-{i}", environment="swe", group_id=f"g-{i // 2}"),
        rl.turn(0, input_tokens=10, output_tokens=5 + i),
    ):
        pass
    rl.force_flush()


@pytest.mark.long  # a compaction raced against a catch-up
def test_a_compaction_that_moves_the_listed_segments_aside_mid_catch_up_changes_no_figure(attached, store):
    """A compaction may move the segments a catch-up listed into ``.replaced/`` while it reads them: the
    incremental catch-up reads them again where they now are and publishes what a fresh derivation holds."""
    from rollscope.queries.derive import derive
    from rollscope.store import compaction, layout
    from rollscope.store.derived import catch_up

    rl = attached()
    for i in range(4):
        publish_rollout(rl, i)
        if i == 2:
            Reader(store, run_id="exp-7")  # derives the first three segments
    moved = []

    def compacting(job):
        compaction.compact_partition(layout.partition_dir(store, "spans", "exp-7"), mode="full")
        moved.extend(p for p in job.live if not p.exists())
        return derive(job)

    state, how = catch_up(store, "exp-7", compacting)

    assert len(moved) == 4 and how == "derived" and state.how == "incremental"
    live = Reader(store, run_id="exp-7")
    assert live.derivations["current"] == 1  # the compacted segment holds what was derived
    assert derived(live, "exp-7") == derived(fresh(store), "exp-7")


@pytest.mark.long  # a live writer and compactor, paced
def test_a_live_compaction_of_derived_and_new_segments_is_caught_up_from_the_new_ones(attached, store):
    """The writers compact while a run is live: a merge of derived and new segments, then a merge of that merge
    with a newer segment. Each is caught up incrementally (from the new sources, kept aside for the grace
    period), never by deriving the run in full, and holds what a fresh derivation does."""
    from rollscope.store import compaction, layout

    partition = layout.partition_dir(store, "spans", "exp-7")
    rl = attached()
    live = None
    for i in range(6):
        publish_rollout(rl, i)
        if i == 1:
            live = Reader(store, run_id="exp-7")  # derives the first two segments
        if i in (2, 4):  # a merge of derived and new segments; then of that merge and a new one
            compaction.compact_partition(partition, mode="full")
            assert any(layout.sources(p) for p in layout.segments(store, "spans", "exp-7"))
            live.refresh()
            assert derived(live, "exp-7") == derived(fresh(store), "exp-7"), f"after segment {i}"

    live.refresh()
    assert live.derived_how == {"full": 1, "incremental": 3}, live.derived_how
    assert derived(live, "exp-7") == derived(fresh(store), "exp-7")


def misplaced(store, run: str) -> dict[str, int]:
    """Rows of each blocked table kept in a part whose blocks do not hold their consuming step (a table without a
    step column: its rollout's, from rollout_steps). A catch-up rewrites the parts of the blocks it touches, so a
    row in the wrong part is either missed when its step changes or rewritten by every catch-up."""
    import duckdb

    files = store_derived.current(store, run).files()
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE steps AS SELECT rollout_id, step FROM read_parquet(?)",
        [[str(p) for p in files["rollout_steps"]]],
    )
    found = {}
    for table in (t for t in TABLES if t.blocked):
        for part in files[table.name]:
            source = f"read_parquet('{part}')"
            columns = {c for (c, *_) in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
            rows = (
                f"{source} AS t" if "step" in columns else f"{source} AS t LEFT JOIN steps USING (rollout_id)"
            )
            span = store_derived.part_range(part)
            wrong = (
                "step IS NOT NULL"
                if span is None
                else f"step IS NULL OR step // {store_derived.BLOCK_STEPS} NOT BETWEEN {span[0]} AND {span[1]}"
            )
            count = con.execute(f"SELECT count(*) FROM {rows} WHERE {wrong}").fetchone()[0]
            if count:
                found[table.name] = found.get(table.name, 0) + count
    return found


@pytest.mark.long
def test_a_full_derivation_keeps_each_row_in_the_block_of_its_step(step_blocks):
    store, _ = simulated("samples")
    reader = fresh(store)

    assert misplaced(reader.store, "samples") == {}


def all_rollouts_in_block_p(store, run: str) -> None:
    """The layout a full derivation left when it wrote the rollouts table before the consuming steps were known
    (whether it did depended on its writer threads' timing): the table's rows in one part of block p, which the
    run's manifest names instead of its parts."""
    import json

    import duckdb

    state = store_derived.current(store, run)
    part = state.root / "parts" / "rollouts" / "b=p" / "earlier.parquet"
    part.parent.mkdir(parents=True, exist_ok=True)
    duckdb.connect().execute(
        f"COPY (SELECT * FROM read_parquet(?, hive_partitioning = false)) TO '{part}' (FORMAT parquet)",
        [[str(p) for p in state.files()["rollouts"]]],
    )
    manifest = state.root / store_derived.MANIFEST
    data = json.loads(manifest.read_text())
    data["tables"]["rollouts"] = [str(part.relative_to(state.root))]
    manifest.write_text(json.dumps(data))


@pytest.mark.long
def test_a_catch_up_moves_consumed_rollouts_out_of_the_pending_block_an_earlier_derivation_left_them_in(
    store, step_blocks
):
    """A full derivation used to write the rollouts table before the consuming steps were known: every row in
    block p, which each catch-up rewrote whole (seconds per catch-up at 10M spans). The next catch-up of such a
    state moves them to their steps' blocks and derives what a fresh reader does."""
    spans = stored_spans(simulated("samples")[0], "samples").sort_by("start_ns")
    first = spans.num_rows * 3 // 4
    writer = SegmentWriter(store)
    writer.publish("samples", spans.slice(0, first))
    live = Reader(store, run_id="samples")
    all_rollouts_in_block_p(store, "samples")
    assert misplaced(store, "samples").get("rollouts", 0) > 0  # the earlier layout

    writer.publish("samples", spans.slice(first))
    live.refresh()

    assert live.derived_how == {"full": 1, "incremental": 1}
    assert misplaced(store, "samples") == {}
    assert derived(live, "samples") == derived(fresh(store), "samples")
