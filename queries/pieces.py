"""A run's full derivation in pieces of consecutive steps, derived in parallel (``derive_full``).

Deriving every table from every span in one DuckDB database grew faster than the run (11 / 47 / 196 / 807 s
at 1M / 3M / 10M / 30M spans): its whole-run joins and windows outgrew the memory limit and spilled, and each
blocked table was written one part per block, then merged tier by tier, every row rewritten log8(blocks)
times. The tables are kept in blocks of consuming steps (``store/derived.py``), and a step's rows come from the
spans of its rollouts and their groups alone (what an incremental catch-up's scope relies on,
``sql/raw/scope.sql``), so a full derivation is cut the same way, in three stages:

1. **plan** (``plan``, one process): what needs the whole run but reads little of it: the rollouts and their
   consuming steps (a rollout's step decides its piece), the train steps, the trace index, each process's
   activity, the trainer's goodput, each segment's time range and the run-wide facts a piece is told
   (``sql/raw/derive_index.sql``). Then the pieces: runs of consecutive blocks of about ``PIECE_SPANS`` spans,
   and one for the rollouts no step has consumed (block ``p``), each with the traces it reads
   (``sql/raw/plan_pieces.sql``) and the segments holding them.
2. **pieces** (``derive_piece``, in parallel: worker processes here, or tasks on other machines sharing the
   store): each reads its traces' spans (``sql/raw/scope_spans.sql``: only the segments whose time range meets
   theirs, with the train steps and the run-wide facts), runs ``derive_full.sql`` over them, and writes its
   blocks' rows straight into the parts the table ends in (``parquet_parts.final_parts``: the parts ``_consolidate`` would
   leave), sorted as a merged part is.
3. **finish** (``finish``, one process): the "run" tables, from the pieces' rows on disk (``compute_busy``,
   ``rollout_goodput``, ``run_percentiles`` and its windows, ``wasted_sums``), and the parts that several
   pieces wrote rows of, merged.

A run of fewer than ``SPLIT_SPANS`` spans is one piece, derived in the plan's own database. Each stage opens
its own DuckDB database and hands the next only files and the picklable ``Plan`` / ``PieceOutput``, so the
pieces of one run can be scheduled anywhere the store's filesystem is seen::

    with derive_db.connection(job.staging, schemas) as con:
        plan = pieces.plan(con, job)
    outputs = [pieces.derive_piece(plan, piece) for piece in plan.pieces]  # any order, any process
    with derive_db.connection(job.staging, schemas) as con:
        result = pieces.finish(con, job, plan, outputs)

Its statements are files of ``sql/raw/derive/`` (and ``derive_full.sql``'s, chosen table by table) run through
``sqlfiles``.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from rollscope.queries import (
    catch_up,
    definitions,
    derive_db,
    derived_schemas,
    parquet_parts,
    refresh,
    sqlfiles,
)
from rollscope.queries.tables import BY_NAME as _TABLES
from rollscope.queries.tables import FILLS, TABLES
from rollscope.store import derived
from rollscope.store.derived import Job, Result

log = logging.getLogger("rollscope.derive")

WRITERS = 2  # tables a full derivation writes at once (each piece, the plan, the finish)
PIECE_SPANS = 1_000_000  # about how many spans one piece derives
SPLIT_SPANS = 300_000  # a run of fewer spans is derived as one piece
# The tables the plan derives for the whole run (the first three read by every piece, derived again there
# from its own spans and written by the pieces; the others written by the plan) and those finish derives from
# the pieces' rows.
PLANNED = ("rollouts", "train_steps", "rollout_steps", "process_activity", "trainer_goodput")
WRITTEN_BY_PLAN = ("train_steps", "process_activity", "trainer_goodput")
FINISHED = ("compute_busy", "run_percentiles", "rollout_goodput", "wasted_sums")


@dataclass(frozen=True)
class Piece:
    """Consecutive blocks of consuming steps (or block ``p``), and where its spans are."""

    index: int
    blocks: tuple[str, ...]  # the block labels whose rows it writes (``derived.block_of``)
    segments: tuple[str, ...]  # the live segments holding its traces' spans
    lo_ns: int  # its traces' first start and last end
    hi_ns: int
    rollouts: int  # how many rollouts its blocks consumed (its share of the work, for progress)
    whole: bool = False  # the run's only piece: every span, read as it is


@dataclass(frozen=True)
class Plan:
    """What the pieces and finish of one run's full derivation need, in files and values."""

    run_id: str
    staging: Path
    pieces: tuple[Piece, ...]
    labels: dict[str, tuple[str, int]]  # block -> (the part it ends in, b=<label>; the piece writing it)
    facts: dict  # bound, samples, orphans, spans (derive_index.sql)
    ranges: dict  # each segment's first start and last end, by name
    schemas: dict  # every table's columns and types
    traces: Path | None  # each piece's traces (piece, trace_id), sorted by piece
    tables: dict[str, list[Path]]  # the parts the plan wrote (and the trace index, train spans)
    block_steps: int  # derived.BLOCK_STEPS when planned (a worker process is told it)
    workers: int  # processes deriving pieces at once
    memory: int  # DuckDB's memory limit in each of them, in bytes
    messages: tuple[str, ...] = ()  # the run's live message segments (the transcript flags read them)


@dataclass
class PieceOutput:
    """The parts one piece wrote: per table, each part's label (``b=<label>``) and file."""

    index: int
    parts: dict[str, list[tuple[str, Path]]] = field(default_factory=dict)
    seconds: float = 0.0
    peak_rss: int = 0  # the process's peak resident memory, in bytes, after the piece
    # CPU seconds of each step (DuckDB runs a piece's statement on the thread that asks, on one core): "read"
    # (its spans), each table's statement ("derive <table>") and its writing ("write <table>")
    profile: dict[str, float] = field(default_factory=dict)


Report = Callable[[float, str], None]  # fraction done (0..1), what is being derived


def derive_full(job: Job, progress: Report | None = None) -> Result:
    """Every table from every span of the run: planned, derived in pieces (in parallel when there are
    several) and finished (module docstring)."""
    report = progress or (lambda fraction, what: None)
    schemas = derived_schemas.shipped()
    with derive_db.connection(job.staging, schemas) as con:
        report(0.0, "reading the run's rollouts and steps")
        the_plan = plan(con, job, write=False)
        report(_PLAN_SHARE, f"deriving {len(the_plan.pieces)} piece(s)")
        outputs = _derive_pieces(con, the_plan, report)
        report(1 - _FINISH_SHARE, "deriving the run-wide tables")
        profile: dict[str, float] = {}
        result = finish(con, job, the_plan, outputs, profile)
    for output in outputs:
        for step, seconds in output.profile.items():
            profile[step] = profile.get(step, 0.0) + seconds
    log.debug(
        "run %s: derived in %d pieces (%d at once); CPU seconds by step: %s",
        job.run_id,
        len(the_plan.pieces),
        the_plan.workers,
        ", ".join(f"{k} {v:.2f}" for k, v in sorted(profile.items(), key=lambda kv: -kv[1])),
    )
    report(1.0, "done")
    return result


_PLAN_SHARE, _FINISH_SHARE = 0.1, 0.1  # of the progress shown, before the pieces and after them


# --- 1. plan -----------------------------------------------------------------------------------------------


def plan(con, job: Job, *, write: bool = True) -> Plan:
    """The run-wide tables and the pieces (module docstring, 1), in ``con`` (``derive_db.connection``). The
    plan's own tables are written before it returns, unless ``write`` is False (``derive_full`` writes them
    beside the pieces: ``_write_plan_tables``)."""
    from rollscope.queries.reader import schema_file
    from rollscope.settings import Settings

    settings = Settings.resolve()
    run = job.run_id
    derive_db.raw_views(
        con,
        [*map(str, job.live), schema_file("spans")],
        [schema_file("collector_stats")],
        [*map(str, job.messages), schema_file("messages")],
    )
    for statement in _statements(PLANNED):
        sqlfiles.execute_statement(con, statement, run=run)
    facts = sqlfiles.execute(con, "raw/derive_index", fetch=sqlfiles.first_row, run=run)
    catch_up.key_rows(con, "_trace_keys_mat", "_traces_mat")
    ranges = derive_db.segment_ranges(con, job.live)
    schemas = derive_db.schemas_of(con)
    blocks = _blocks(con)
    layout = parquet_parts.final_parts(sorted(int(b) for b in blocks if b != "p"))
    cuts = _cut(layout, blocks, int(facts["spans"]), settings.derive_cores)
    labels = _labels(layout, cuts)
    _label_table(con, labels)
    # every piece reads the train spans: written before they start
    tables = {
        "_train_spans": [parquet_parts.write_whole(con, "_train_spans", "_train_spans_mat", job.staging)]
    }
    if len(cuts) <= 1:
        pieces = (Piece(0, tuple(labels), tuple(map(str, job.live)), 0, 0, sum(blocks.values()), whole=True),)
        traces = None
    else:
        pieces, traces = _pieces(con, job, cuts, blocks, ranges)
    workers = max(1, min(settings.derive_cores, len(pieces)))
    planned = Plan(
        run,
        job.staging,
        pieces,
        labels,
        {k: (None if v is None else (v if isinstance(v, bool) else int(v))) for k, v in facts.items()},
        ranges,
        schemas,
        traces,
        tables,
        derived.BLOCK_STEPS,
        workers,
        settings.derive_memory_bytes // workers,
        tuple(map(str, job.messages)),
    )
    if write:
        planned.tables.update({n: f.result() for n, f in _write_plan_tables(con, planned).items()})
    return planned


def _statements(names, skip: tuple[str, ...] = ()) -> list[tuple[str, frozenset, bool]]:
    """The statements of derive_full.sql filling tables ``names`` (all when None), less those of ``skip``."""
    chosen = []
    for statement in sqlfiles.statements("raw/derive_full"):
        filled = FILLS.search(statement[0])
        name = filled[1] if filled else None
        if (names is None or name in names) and name not in skip:
            chosen.append(statement)
    return chosen


def _blocks(con) -> dict[str, int]:
    """Every block of consuming steps the run's rows fall in (``p``: not consumed yet), with the rollouts it
    holds: the rollouts' consuming steps and the train steps' own (a train step's work counts at its step)."""
    rows = sqlfiles.execute(
        con, "raw/derive/blocks", fetch=sqlfiles.fetchall, block_steps=derived.BLOCK_STEPS
    )
    return dict(rows)


def _cut(layout: list[tuple[int, int]], blocks: dict[str, int], spans: int, cores: int) -> list[list[int]]:
    """The numeric blocks of each piece: consecutive, about ``PIECE_SPANS`` spans each (at least one per core
    once the run has ``SPLIT_SPANS``), cut where the layout's parts end: only a part larger than a piece is
    split, so few parts get rows from more than one piece (``finish`` merges those)."""
    numbered = sorted(int(b) for b in blocks if b != "p")
    if spans < SPLIT_SPANS or not numbered:
        return [numbered]
    target = (sum(blocks.values()) or 1) / max(math.ceil(spans / PIECE_SPANS), cores)
    pieces, current, weight = [], [], 0.0
    for first, last in layout:
        held = [b for b in numbered if first <= b <= last]
        part = sum(blocks.get(str(b), 0) for b in held)
        if part > target * 1.25:  # larger than a piece: split block by block
            for b in held:
                current, weight = current + [b], weight + blocks.get(str(b), 0)
                if weight >= target:
                    pieces, current, weight = pieces + [current], [], 0.0
            continue
        if current and weight + part > target * 1.25:
            pieces, current, weight = pieces + [current], [], 0.0
        current, weight = current + held, weight + part
        if weight >= target:
            pieces, current, weight = pieces + [current], [], 0.0
    return pieces + [current] if current else pieces


def _labels(layout: list[tuple[int, int]], cuts: list[list[int]]) -> dict[str, tuple[str, int]]:
    """Each block's part label and the piece that writes its rows (the pending piece, last, block p: every run
    may have rows of no step, turns of no rollout among them)."""
    piece_of = {b: i for i, blocks in enumerate(cuts) for b in blocks}
    labels = {}
    for first, last in layout:
        label = str(first) if first == last else f"{first}_{last}"
        for b in range(first, last + 1):
            if b in piece_of:
                labels[str(b)] = (label, piece_of[b])
    labels["p"] = ("p", len(cuts) if len(cuts) > 1 else 0)
    return labels


def _label_table(con, labels: dict[str, tuple[str, int]]) -> None:
    """_labels(_block, label, piece): what ``_write_parts`` joins each row's block with."""
    blocks = list(labels)
    sqlfiles.execute(
        con,
        "raw/derive/labels",
        blocks=blocks,
        labels=[labels[b][0] for b in blocks],
        pieces=[labels[b][1] for b in blocks],
    )


def _pieces(con, job: Job, cuts, blocks, ranges) -> tuple[tuple[Piece, ...], Path]:
    """The pieces of a run cut in ``cuts`` (and the pending piece), each with its traces' time range and
    segments; their traces written to one file, sorted by piece."""
    cut = [(b, i) for i, bs in enumerate(cuts) for b in bs]
    sqlfiles.execute(con, "raw/derive/block_piece", blocks=[b for b, _ in cut], pieces=[i for _, i in cut])
    derive_db.ranges_table(con, ranges)
    sqlfiles.execute(con, "raw/plan_loose_traces", run=job.run_id)
    pending = len(cuts)
    found = sqlfiles.execute(
        con, "raw/plan_pieces", fetch=sqlfiles.all_rows, pending=pending, block_steps=derived.BLOCK_STEPS
    )
    paths = {p.name: str(p) for p in job.live}
    weights = [sum(blocks.get(str(b), 0) for b in bs) for bs in cuts] + [blocks.get("p", 0)]
    block_sets = [tuple(map(str, bs)) for bs in cuts] + [("p",)]
    read = {row["piece"]: row for row in found}  # a piece of train steps alone reads no trace
    pieces = tuple(
        Piece(
            i,
            block_sets[i],
            tuple(paths[s] for s in read[i]["segments"] or ()) if i in read else (),
            int(read[i]["lo_ns"]) if i in read else 0,
            int(read[i]["hi_ns"]) if i in read else 0,
            weights[i],
        )
        for i in range(len(block_sets))
    )
    traces = job.staging / ".plan" / "traces.parquet"
    traces.parent.mkdir(exist_ok=True)
    sqlfiles.execute(con, "raw/derive/plan_traces", target=str(traces))
    sqlfiles.execute(con, "raw/derive/plan_release")
    return pieces, traces


# --- 2. pieces ---------------------------------------------------------------------------------------------


def _derive_pieces(con, plan: Plan, report: Report) -> list[PieceOutput]:
    """Every piece: the one piece of a small run in the plan's database; several in worker processes, the
    largest first, while this process writes the plan's own tables."""
    writes = _write_plan_tables(con, plan) if "_traces" not in plan.tables else {}
    if len(plan.pieces) == 1 and plan.pieces[0].whole:
        share = 1 - _PLAN_SHARE - _FINISH_SHARE

        def statement(done: float, name: str) -> None:
            report(_PLAN_SHARE + share * done, f"deriving {name}")

        outputs = [derive_piece(plan, plan.pieces[0], con=con, progress=statement)]
    else:
        outputs = _in_workers(plan, report)
    plan.tables.update({name: future.result() for name, future in writes.items()})
    return outputs


def _in_workers(plan: Plan, report: Report) -> list[PieceOutput]:
    """The pieces ``plan.workers`` at a time, each in a DuckDB database of its own on one core, in threads of
    this process (DuckDB runs a statement without Python's lock; processes would re-import a user's script)."""
    weight = {p.index: p.rollouts for p in plan.pieces}
    total, done, outputs = sum(weight.values()) or 1, 0, []
    with ThreadPoolExecutor(plan.workers, thread_name_prefix="rollscope-piece") as pool:
        futures = [pool.submit(derive_piece, plan, p) for p in sorted(plan.pieces, key=lambda p: -p.rollouts)]
        try:
            for future in as_completed(futures):
                outputs.append(future.result())
                done += weight[outputs[-1].index]
                share = 1 - _PLAN_SHARE - _FINISH_SHARE
                report(_PLAN_SHARE + share * done / total, f"derived {len(outputs)} of {len(futures)} pieces")
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return sorted(outputs, key=lambda o: o.index)


def derive_piece(plan: Plan, piece: Piece, con=None, progress: Report | None = None) -> PieceOutput:
    """One piece's tables (module docstring, 2), written under the plan's staging directory. ``con``: the
    plan's database, which already holds the rollouts, train steps and consuming steps of a whole run.
    ``progress``: told the share of its statements run, and the table each fills."""
    started = time.perf_counter()
    derived.BLOCK_STEPS = plan.block_steps  # a worker process reads the environment, not the planner's value
    try:
        if con is not None:
            return _derive(con, plan, piece, started, PLANNED, progress)
        with derive_db.connection(plan.staging, plan.schemas, memory=plan.memory, threads=1) as own:
            _label_table(own, plan.labels)
            return _derive(own, plan, piece, started, (), progress)
    except duckdb.IOException as e:  # a segment a compaction moved: derive.derive lists again
        raise FileNotFoundError(str(e)) from None


def _derive(con, plan: Plan, piece: Piece, started: float, skip: tuple[str, ...], progress) -> PieceOutput:
    output = PieceOutput(piece.index)
    if not piece.whole:
        clock = time.thread_time()
        _read_spans(con, plan, piece)
        output.profile["read"] = time.thread_time() - clock
    skipped = (
        *skip,
        *FINISHED,
        *(n for n in PLANNED if n not in ("rollouts", "train_steps", "rollout_steps")),
    )
    with ThreadPoolExecutor(WRITERS) as pool:
        writes, waiting = {}, []
        try:
            if skip:  # rollouts, train steps and consuming steps were filled by the plan
                for name in ("rollouts", "rollout_steps"):
                    _submit(con, pool, writes, waiting, name, plan, piece)
            statements = _statements(None, skip=skipped)
            for i, statement in enumerate(statements):
                clock, name = time.thread_time(), FILLS.search(statement[0])[1]
                if progress is not None:
                    progress(i / len(statements), name)
                sqlfiles.execute_statement(con, statement, run=plan.run_id)
                output.profile[f"derive {name}"] = time.thread_time() - clock
                _submit(con, pool, writes, waiting, name, plan, piece)
            for name, future in writes.items():
                output.parts[name], output.profile[f"write {name}"] = future.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    output.seconds = time.perf_counter() - started
    output.peak_rss = _peak_rss()
    return output


def _submit(con, pool, writes: dict, waiting: list, name: str, plan: Plan, piece: Piece) -> None:
    """Write table ``name``'s rows of the piece's blocks beside the next statements, once its blocks are
    known (a table without a step column takes its rollouts': after rollout_steps)."""
    table = _TABLES[name]
    if not table.blocked:
        return
    if parquet_parts.blocks_by_rollout_step(con, name) and "rollout_steps" not in writes:
        waiting.append(name)
        return
    for each in (name, *(waiting if name == "rollout_steps" else ())):
        writes[each] = pool.submit(_timed, _write_parts, con.cursor(), each, plan.staging, piece.index)


def _timed(function, *args):
    """``function(*args)`` and the CPU seconds its thread spent."""
    clock = time.thread_time()
    return function(*args), time.thread_time() - clock


def _read_spans(con, plan: Plan, piece: Piece) -> None:
    """Point raw_spans at the piece's spans: its traces' spans from its segments, every train step and
    weight sync, and the run-wide facts (scope_spans.sql)."""
    from rollscope.queries.reader import schema_file

    sqlfiles.execute(con, "raw/derive/piece_traces", traces=str(plan.traces), piece=piece.index)
    derive_db.view(con, "_train_all", plan.tables["_train_spans"], schema="_train_spans_mat")
    values = {
        "run": plan.run_id,
        "lo": piece.lo_ns,
        "hi": piece.hi_ns,
        "bound": plan.facts["bound"],
        "samples": plan.facts["samples"],
    }
    spans = derive_db.hive_paths([*piece.segments, schema_file("spans")])
    sqlfiles.execute(con, "raw/scope_spans", fill={"files": spans}, **values)
    messages = derive_db.hive_paths([*plan.messages, schema_file("messages")])
    sqlfiles.execute(con, "raw/scope_messages", fill={"files": messages}, **values)
    sqlfiles.execute(con, "raw/derive/scoped_raw_views")


def _write_parts(cur, name: str, staging: Path, piece: int | None) -> list[tuple[str, Path]]:
    """Table ``name``'s rows of piece ``piece``'s blocks (None: every block), each into the part of the
    run's layout holding its block, sorted as a merged part is (``Table.row_order``)."""
    try:
        relation = parquet_parts.with_block(cur, f"_{name}_mat")
        labels = sqlfiles.execute(
            cur, "raw/derive/piece_writing", fetch=sqlfiles.fetchall, fill={"relation": relation}, piece=piece
        )
        fill = {
            "select": sqlfiles.Fragment(derive_db.stored(cur, "_writing", skip=("label",))),
            "order": parquet_parts.merged_order(name),
        }
        parts = []
        for (label,) in labels:
            target = staging / name / f"b={label}" / f"{secrets.token_hex(6)}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            sqlfiles.execute(cur, "raw/derive/piece_write", fill=fill, label=label, target=str(target))
            parts.append((label, target))
        sqlfiles.execute(cur, "raw/derive/drop_table", fill={"table": "_writing"})
        return parts
    finally:
        cur.close()


def _peak_rss() -> int:
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


# --- 3. finish ---------------------------------------------------------------------------------------------


def _write_plan_tables(con, plan: Plan) -> dict:
    """The plan's own tables and the index, written beside the pieces (``WRITERS`` at a time)."""
    pool = ThreadPoolExecutor(WRITERS)
    writes = {
        name: pool.submit(_write_whole, con.cursor(), name, f"_{name}_mat", plan.staging)
        for name in WRITTEN_BY_PLAN
    }
    writes.update(
        {
            name: pool.submit(_write_whole, con.cursor(), name, f"{name}_mat", plan.staging)
            for name in catch_up.INDEX
            if name not in plan.tables
        }
    )
    pool.shutdown(wait=False)
    return writes


def _write_whole(cur, name: str, relation: str, staging: Path) -> list[Path]:
    try:
        return [parquet_parts.write_whole(cur, name, relation, staging)]
    finally:
        cur.close()


def finish(con, job: Job, plan: Plan, outputs: list[PieceOutput], profile: dict | None = None) -> Result:
    """The run tables and the merged parts (module docstring, 3): every table's parts and the manifest's
    meta. ``con``: a ``derive_db.connection`` (the plan's, or a new one). ``profile``: filled with the CPU
    seconds of each step."""
    timed = _Timer(profile if profile is not None else {})
    _label_table(con, plan.labels)
    held = _held(outputs)
    pool = ThreadPoolExecutor(WRITERS)  # the merges, beside the run tables (which read their sources)
    try:
        merges = _merging(con, pool, held, plan.staging)
        tables = {
            **{n: [f for fs in labels.values() for f in fs] for n, labels in held.items()},
            **plan.tables,
        }
        held_tables = derive_db.table_names(con)
        for name, files in tables.items():
            _point(con, name, files, plan.schemas, held_tables)
        tables.update(_finish_run_tables(con, plan, timed))
        with timed("process bounds"):
            bounds = refresh.process_bounds(con, None)
        with timed("merge parts (waiting)"):
            tables.update(_merged(held, merges))
    finally:
        pool.shutdown(cancel_futures=True)
    for table in TABLES:
        tables.setdefault(table.name, [])
    facts = plan.facts
    meta = {
        "schemas": plan.schemas,
        "definitions": definitions.digests(),
        "bound": facts["bound"],
        "samples": bool(facts["samples"]),
        "orphans": int(facts["orphans"]),
        "spans": int(facts["spans"]),
        "ranges": plan.ranges,
        "process_bounds": bounds,
    }
    return Result(tables, meta, "full")


def _finish_run_tables(con, plan: Plan, timed) -> dict[str, list[Path]]:
    """The run tables from the pieces' rows (views ``_<table>_mat`` over them), written."""
    tables = {}
    sqlfiles.execute(con, "raw/rederive_spans", fill={"schema": [_schema_file()]})
    for statement in _statements(FINISHED):
        with timed(f"derive {FILLS.search(statement[0])[1]}"):
            sqlfiles.execute_statement(con, statement, run=plan.run_id)
    with timed(f"derive {refresh.WINDOWS}"):
        refresh.quantile_windows(con, plan.run_id, "_run_percentiles_mat")
    for name in ("compute_busy", "rollout_goodput"):
        with timed(f"write {name}"):
            tables[name] = [p for _, p in _write_parts(con.cursor(), name, plan.staging, None)]
    for name in ("run_percentiles", "wasted_sums"):
        tables[name] = [parquet_parts.write_whole(con, name, f"_{name}_mat", plan.staging)]
    tables[refresh.WINDOWS] = [
        parquet_parts.write_whole(con, refresh.WINDOWS, "_quantile_windows_mat", plan.staging)
    ]
    return tables


class _Timer:
    """``with timer(step):`` adds the process's CPU seconds in the block to ``profile[step]``."""

    def __init__(self, profile: dict):
        self.profile = profile

    @contextmanager
    def __call__(self, step: str):
        clock = time.process_time()
        try:
            yield
        finally:
            self.profile[step] = self.profile.get(step, 0.0) + time.process_time() - clock


def _schema_file() -> str:
    from rollscope.queries.reader import schema_file

    return schema_file("spans")


def _held(outputs: list[PieceOutput]) -> dict[str, dict[str, list[Path]]]:
    """Every piece-written table's files by part label (several where several pieces wrote rows of a part)."""
    held: dict[str, dict[str, list[Path]]] = {}
    for output in outputs:
        for name, written in output.parts.items():
            for label, path in written:
                held.setdefault(name, {}).setdefault(label, []).append(path)
    return held


def _merging(con, pool, held: dict[str, dict[str, list[Path]]], staging: Path) -> dict:
    """Start merging each part that several pieces wrote rows of into one (sorted as a merged part is)."""
    return {
        (name, label): pool.submit(_merge, con.cursor(), name, label, files, staging)
        for name, labels in held.items()
        for label, files in labels.items()
        if len(files) > 1
    }


def _merged(held: dict[str, dict[str, list[Path]]], merges: dict) -> dict[str, list[Path]]:
    """Every piece-written table's parts once the merges are done (their sources deleted)."""
    tables = {}
    for name, labels in held.items():
        tables[name] = []
        for label, files in sorted(labels.items()):
            if (name, label) in merges:
                tables[name].append(merges[(name, label)].result())
                for file in files:
                    file.unlink()
            else:
                tables[name].append(files[0])
    return tables


def _merge(cur, name: str, label: str, files: list[Path], staging: Path) -> Path:
    try:
        target = staging / name / f"b={label}" / f"{secrets.token_hex(6)}.parquet"
        parquet_parts.merge_parts(cur, name, files, target)
        return target
    finally:
        cur.close()


def _point(con, name: str, files: list[Path], schemas: dict, tables: set[str]) -> None:
    """``_<name>_mat`` (``<name>_mat`` for the index) as a view over the parts ``files``; ``tables``: the
    database's tables (``derive_db.table_names``, asked once for every relation pointed), dropped first."""
    relation = f"_{name}_mat" if name in _TABLES else f"{name}_mat"
    if not files and name not in _TABLES:
        return
    if relation in tables:
        sqlfiles.execute(con, "raw/derive/drop_table", fill={"table": relation})
    if files:
        derive_db.view(con, relation, files)
    else:
        from rollscope.queries.reader import empty_select

        query = sqlfiles.Fragment(empty_select(schemas[name]))
        sqlfiles.execute(con, "raw/derive/view_of", fill={"name": relation, "query": query})


# --- tables whose definition changed ---------------------------------------------------------------------


def derive_tables(job: Job, names: list[str]) -> Result:
    """Tables ``names`` derived again from the previous state's other tables, whose parts are kept: the tables
    whose definition changed (``queries/definitions.py``), each of which reads derived tables only, in a state
    that holds every live segment. Costs what those tables read, not the run's spans."""
    previous = job.previous
    parts = {name: [Path(p) for p in files] for name, files in previous.files().items()}
    schemas = derived_schemas.current()
    kept = previous.meta.get("schemas") if isinstance(previous.meta.get("schemas"), dict) else {}
    with derive_db.connection(
        job.staging, {**schemas, **{n: c for n, c in kept.items() if n in schemas}}
    ) as con:
        held_tables = derive_db.table_names(con)
        for name, files in parts.items():
            if name not in names and (name in _TABLES or name in catch_up.INDEX):
                _point(con, name, files, schemas, held_tables)
        _label_table(con, {b: (label, 0) for b, (label, _) in _labels_of(con).items()})
        for statement in _statements(names):
            sqlfiles.execute_statement(con, statement, run=job.run_id)
        written = {}
        for name in names:
            if _TABLES[name].blocked or _TABLES[name].refresh in ("windows", "tail"):
                written[name] = [p for _, p in _write_parts(con.cursor(), name, job.staging, None)]
            else:
                written[name] = [parquet_parts.write_whole(con, name, f"_{name}_mat", job.staging)]
        if "run_percentiles" in names:
            refresh.quantile_windows(con, job.run_id, "_run_percentiles_mat")
            written[refresh.WINDOWS] = [
                parquet_parts.write_whole(con, refresh.WINDOWS, "_quantile_windows_mat", job.staging)
            ]
    known = {*_TABLES, *catch_up.INDEX, refresh.WINDOWS}
    tables = {name: files for name, files in {**parts, **written}.items() if name in known}
    meta = {
        **previous.meta,
        "schemas": {**kept, **{n: schemas[n] for n in names}},
        "definitions": definitions.digests(),
    }
    return Result(tables, meta, "tables")


def _labels_of(con) -> dict[str, tuple[str, int]]:
    """The layout labels of the blocks a state's rows fall in (its consuming steps' and train steps')."""
    numbered = sorted(int(b) for b in _blocks(con) if b != "p")
    return _labels(parquet_parts.final_parts(numbered), [numbered])
