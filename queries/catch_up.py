"""The incremental catch-up (``derive_scoped``): the previous state plus what the new segments change.

The scope the new segments can change (``sql/raw/scope*.sql``: their rollouts and traces, their groups, the steps
they touch, every rollout and trace of those steps and of the not-yet-consumed step NULL), the spans of that
scope read from the few segments whose time range meets a scoped trace's (the derived trace index ``_traces``
and the segments' time ranges in the manifest), the same definitions run over those spans alone
(``derive_full.sql``), and each table's rows of the scoped steps (or rollouts) replaced, block part by block
part; the previous parts of other blocks are reused as they are. "run" tables are refreshed by their rule
(``refresh``). When it cannot be sure it raises ``Fallback`` and the run is derived in full (``derive``).

Apart from the full derivation (``pieces``) because it builds on a previous state and must know when it cannot.

Its statements are files of ``sql/raw/derive/`` run through ``sqlfiles`` (values as bound parameters; names, file
lists of views and the fragments composed into a blocked table's rows as ``@placeholders``).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from rollscope.queries import derived_schemas, sqlfiles
from rollscope.queries.derive_db import (
    column_names,
    connection,
    hive_paths,
    ranges_table,
    raw_views,
    schemas_of,
    segment_ranges,
    view,
)
from rollscope.queries.parquet_parts import (
    FANOUT,
    consolidate,
    union,
    with_block,
    write_blocked,
    write_whole,
)
from rollscope.queries.refresh import (
    IN_STEPS,
    WINDOWS,
    rederive,
    refresh_quantiles,
    refresh_tail,
    refresh_windows,
    scope_blocks,
)
from rollscope.queries.tables import TABLES
from rollscope.store import derived, keyed
from rollscope.store.derived import Job, Result, holds

log = logging.getLogger("rollscope.derive")


class Fallback(Exception):
    """The incremental path cannot be sure of this catch-up: derive the run in full."""


# the derived index, kept with the tables (not read by analyses)
INDEX = ("_traces", "_trace_keys", "_train_spans")


# How each index table's rows are merged (``_index_parts``): the trace index's into one row per trace and
# rollout, its keys' into distinct pairs, the train spans' kept as they are.
_INDEX_MERGES = {
    "_traces": "raw/derive/index_traces",
    "_trace_keys": "raw/derive/index_keys_merge",
    "_train_spans": "raw/derive/index_train_merge",
}


def key_rows(con, target: str, rows: str) -> None:
    """``target``: the trace index's keys of index rows ``rows`` (``index_keys.sql``)."""
    sqlfiles.execute(con, "raw/derive/index_keys", fill={"target": target, "rows": rows})


# a fragment: the rows of the scope's rollouts
_IN_ROLLOUTS = sqlfiles.Fragment("rollout_id IN (SELECT rollout_id FROM _scope_rollouts)")


def derive_scoped(job: Job) -> Result:
    """The previous state plus what the new segments change (module docstring); raises Fallback when it
    cannot be sure."""
    from rollscope.queries.reader import schema_file

    previous, run = job.previous, job.run_id
    meta = previous.meta
    if not {"ranges", "spans", "samples"} <= meta.keys() or meta.get("orphans"):
        raise Fallback("the previous state has no index for an incremental catch-up")
    parts = {name: [Path(p) for p in files] for name, files in previous.files().items()}
    # _trace_keys may be missing: a state from before it was kept takes it on this catch-up (_key_index)
    if not set(parts) >= {*(t.name for t in TABLES), *INDEX} - {"_trace_keys"} or any(
        t.scope == "run" and t.refresh is None for t in TABLES
    ):
        raise Fallback("a table without an incremental rule")
    new, ranges, measured = _new_segments(job.live, previous.segments, meta["ranges"])
    if not new:  # only compactions since: the same rows, under the live segments' names
        return Result(parts, {**meta, "ranges": ranges}, "incremental")
    import pyarrow.parquet as pq

    added = sum(pq.read_metadata(p).num_rows for p in new)
    if added > meta["spans"]:
        raise Fallback("more new spans than derived ones")
    schemas = meta.get("schemas")
    if not isinstance(schemas, dict) or set(schemas) != {t.name for t in TABLES}:
        schemas = derived_schemas.shipped()  # a state from before schemas were kept; None: bind, once
    with connection(job.staging, schemas) as con:
        schemas = schemas or schemas_of(con)
        for name in ("_train_spans", "train_steps", "process_activity"):
            view(con, f"_old_{name}", parts[name], schema=f"_{name.lstrip('_')}_mat")
        if "_trace_keys" not in parts:  # a state from before the index was looked up by key
            _key_index(con, job, parts)
        raw_views(con, [*map(str, new), schema_file("spans")], [schema_file("collector_stats")])
        sqlfiles.execute(con, "raw/derive/catch_up_new", run=run)
        params = {"run": run, "samples": meta["samples"], "bound": meta["bound"]}
        why = sqlfiles.execute(con, "raw/scope_seed", fetch=sqlfiles.first_row, **params)["fallback"]
        if isinstance(why, str):
            raise Fallback(why)
        ranges.update(segment_ranges(con, measured))
        sqlfiles.execute(con, "raw/derive/catch_up_new_activity", run=run)
        prior = _PriorSteps(con, parts["rollout_steps"])
        _scope_and_derive(con, job, parts, ranges, params, _Index(parts), prior)
        notes: dict = {}
        tables = _merge(con, job, parts, notes, prior)
    meta = {**meta, **notes, "spans": meta["spans"] + added, "ranges": ranges, "schemas": schemas}
    return Result(tables, meta, "incremental")


def _new_segments(
    live: list[Path], derived_from: frozenset[str], ranges: dict
) -> tuple[list[Path], dict, list[Path]]:
    """The files holding the rows the previous state lacks, the time ranges of the live segments it holds (a
    compacted one's is its sources'), and the live segments whose range must be read from their own footer.

    The writers compact while a run is live, and a compaction may merge derived segments with new ones, or
    merge an earlier merge again: a compacted segment is followed down to its first sources (``_sources``,
    through the files a compaction keeps aside for a grace period, ``layout.replaced_path``). Its new rows are
    read from the new sources and its range from its own footer; only when a new source is gone already does
    the catch-up derive in full. Fallback too when a derived segment vanished without a compaction."""
    new, kept, covered, measured = [], {}, set(), []
    for path in live:
        if path.name in derived_from:
            covered.add(path.name)
            kept[path.name] = ranges.get(path.name)
            continue
        sources = _sources(path, derived_from)
        derived_sources = {name for name, _ in sources if name in derived_from}
        fresh = [file for name, file in sources if name not in derived_from]
        covered |= derived_sources
        if not fresh:
            spans = [ranges.get(s) for s in derived_sources]
            kept[path.name] = None if None in spans else [min(r[0] for r in spans), max(r[1] for r in spans)]
            continue
        if not derived_sources:
            new.append(path)
        elif None in fresh:
            raise Fallback("a compaction merged derived and new segments, and a new one is gone")
        else:
            new.extend(fresh)
        measured.append(path)
    if covered != derived_from:
        raise Fallback("a derived segment vanished without a compaction")
    if None in kept.values():
        raise Fallback("a segment without a time range")
    return new, kept, measured


def _sources(path: Path, derived_from: frozenset[str]) -> list[tuple[str, Path | None]]:
    """A live segment's first sources (``derived.first_sources``; itself when no compaction made it), each with
    its file, in place or kept aside by a compaction (None: gone for good; a derived one is not looked for)."""
    found = derived.first_sources(path, derived_from)
    return sorted(found.items()) if found else [(path.name, path)]


def _stepped(con, parts: dict[str, list[Path]], blocks: set[str], read: set[Path]) -> None:
    """Add to _stepped(step, rollout_id, trace_id) the previous rows of the blocked tables in ``blocks`` that
    name a rollout or a trace, for scope.sql. The scope's blocks only grow within a catch-up, so each part is
    read once (``read``: the parts read so far; empty on the first call, which creates the table): the scope
    grows over several passes, and reading every part of every scoped block again at each pass was a fifth
    of a small catch-up."""
    if not read:
        sqlfiles.execute(con, "raw/derive/stepped_create")
    selects = []
    for table in TABLES:
        files = [p for p in parts[table.name] if p not in read and holds(p, blocks)]
        if not table.blocked or not files:
            continue
        read.update(files)
        columns = column_names(con, f"_{table.name}_mat")  # the previous state's columns (derive_scoped)
        if "step" not in columns or not columns & {"rollout_id", "trace_id"}:
            continue
        rollout = "rollout_id" if "rollout_id" in columns else None
        trace = "trace_id" if "trace_id" in columns and table.scope == "trace" else None
        paths = [str(f) for f in files]
        selects.append(
            sqlfiles.fragment("raw/derive/stepped_select", rollout=rollout, trace=trace, files=paths)
        )
    if selects:
        union_all = sqlfiles.Fragment(" UNION ALL ".join(selects))
        sqlfiles.execute(con, "raw/derive/stepped_insert", fill={"selects": union_all})


class _Index:
    """The previous state's trace index, looked up by key (``store.keyed``): _idx holds the new spans' rows and,
    once ``fill`` has run, every previous row of the traces the scope looks up (each trace whole), not the
    index of the whole run, which a catch-up used to copy and scan at every pass (1.9 s at 30M spans)."""

    def __init__(self, parts: dict[str, list[Path]]):
        self.traces = keyed.Keyed(parts["_traces"], "trace_id")
        self.keys = keyed.Keyed(parts["_trace_keys"], "key")
        self.seen_traces: set[bytes] = set()
        self.seen_keys: set[str] = set()

    def fill(self, con) -> None:
        """Add to _idx the rows of the traces and ids the scope's next pass looks up (index_wanted.sql), until
        those rows name no id not looked up yet (a rollout's rows give its group, a group's its members)."""
        while True:
            (wanted,) = sqlfiles.execute(con, "raw/index_wanted", fetch=sqlfiles.all_rows)
            keys = list(set(wanted["keys"] or ()) - self.seen_keys)
            traces = set(wanted["traces"] or ()) - self.seen_traces
            self.seen_keys.update(keys)
            for found in self.keys.read(keys):
                traces |= {t for (t,) in _with_found(con, found, "raw/derive/index_keys_traces", keys=keys)}
            traces -= self.seen_traces
            if not traces:
                return
            self.seen_traces |= traces
            for found in self.traces.read(traces):
                _with_found(con, found, "raw/derive/index_add_traces", traces=list(traces))


def _with_found(con, found, name: str, **params) -> list[tuple]:
    """The rows of file ``name`` run over the Arrow table ``found`` as _found (fetched before _found goes;
    none for a statement that is not a query)."""
    con.register("_found", found)
    try:
        return sqlfiles.execute(con, name, fetch=sqlfiles.fetchall, **params) or []
    finally:
        con.unregister("_found")


def _key_index(con, job: Job, parts: dict[str, list[Path]]) -> None:
    """A state whose trace index was not kept sorted by key (from before ``KEYED``): its parts' rows, as they
    are, rewritten as one part sorted by trace, and the keys' part; once, over the whole index (10-15 s at 30M
    spans, most of it sorting 4.5M rows and 6.6M keys)."""
    view(con, "_old__traces", parts["_traces"], schema="_traces_mat")
    sqlfiles.execute(con, "raw/derive/key_index")
    key_rows(con, "_keys_merged", "_idx_merged")
    parts["_traces"] = [write_whole(con, "_traces", "_idx_merged", job.staging)]
    parts["_trace_keys"] = [write_whole(con, "_trace_keys", "_keys_merged", job.staging)]


class _PriorSteps:
    """_prior_steps(rollout_id, step): the consuming step in the previous state of each rollout the scope can
    name, for scope.sql and ``_replace_rows``.

    A scoped rollout may have moved from a step whose block no scoped step shares (a late group member moves
    its group to a later train step; a recorded decision for another step): its rows at the old step must
    leave that step's aggregates, and a table keyed by rollout must drop its row from the old block's part.
    ``_stepped`` reads only the scoped blocks, so it cannot see that step; rollout_steps' parts can. Only the
    rollouts asked for are read (``fill``, a semi-join over two narrow columns), not every rollout's step
    grouped by rollout, which cost a catch-up 0.4-0.6 s at 30M spans (2.2M rollouts) however little was new."""

    def __init__(self, con, files: list[Path]):
        self.files = [str(f) for f in files]
        sqlfiles.execute(con, "raw/derive/prior_steps_create")

    def fill(self, con, wanted: str, **params) -> None:
        """Add the previous step of each rollout the file ``wanted`` names (into _prior_wanted, answering how
        many) that was not asked for before: one scan of rollout_steps' parts when there is one, none when there
        is not."""
        if not sqlfiles.execute(con, wanted, fetch=sqlfiles.first_row, **params)["wanted"]:
            return
        if self.files:
            sqlfiles.execute(con, "raw/derive/prior_steps_read", files=self.files)
        sqlfiles.execute(con, "raw/derive/prior_asked")


def _scope_and_derive(
    con, job: Job, parts, ranges: dict, params: dict, index: _Index, prior: _PriorSteps
) -> None:
    """Grow the scope to its closure, derive it from its spans; again (at most twice) when a scoped rollout
    moved to a step outside the scope (a late group member, a recorded decision for an earlier step).

    Before each pass of scope.sql, ``index.fill`` adds to _idx the previous state's index rows of every id the
    pass looks up: the pass then answers as over the whole index. A pass that adds nothing had every row it
    read, so the scope it stops at is the whole index's, and _idx holds every scoped trace's rows (their time
    ranges, for _scoped_spans): no fill after it would find anything."""
    read: set[Path] = set()
    for _ in range(3):
        size = -1
        while True:
            _stepped(con, parts, scope_blocks(con), read)
            index.fill(con)
            prior.fill(con, "raw/derive/prior_wanted_scope")
            grown = int(sqlfiles.execute(con, "raw/scope", fetch=sqlfiles.first_row)["size"])
            if grown == size:
                break
            size = grown
        _scoped_spans(con, job, ranges, params)
        for table in TABLES:
            sqlfiles.execute(con, "raw/derive/clear_table", fill={"table": f"_{table.name}_mat"})
        _derive_scoped_tables(con, job.run_id)
        moved = [step for (step,) in sqlfiles.execute(con, "raw/derive/moved_steps", fetch=sqlfiles.fetchall)]
        if not moved:
            return
        log.info("run %s: scoped rollouts moved to steps %s", job.run_id, moved)
        sqlfiles.execute(con, "raw/derive/scope_steps_add", steps=moved)
    raise Fallback("the scope kept growing")


def _derive_scoped_tables(con, run: str) -> None:
    """derive_full.sql over the scoped spans, less the statements of the "run" tables refreshed from the other
    derived tables or merged (their rows from a scope alone would be thrown away)."""
    skipped = tuple(
        f"INTO _{t.name}_mat "
        for t in TABLES
        if t.refresh in ("rederive", "quantiles", "merge", "windows", "tail")
    )
    for statement in sqlfiles.statements("raw/derive_full"):
        if not any(marker in statement[0] for marker in skipped):
            sqlfiles.execute_statement(con, statement, run=run)


def _scoped_spans(con, job: Job, ranges: dict, params: dict) -> None:
    """Point raw_spans at the scope's spans, read from the segments whose time range meets a scoped trace's."""
    from rollscope.queries.reader import schema_file

    ranges_table(con, ranges)
    found = sqlfiles.execute(con, "raw/derive/scoped_segments", fetch=sqlfiles.first_row)
    names = set(found["segments"] or ())
    files = [*(str(p) for p in job.live if p.name in names), schema_file("spans")]
    values = {**params, "lo": found["lo"] or 0, "hi": found["hi"] or 0}
    sqlfiles.execute(con, "raw/scope_spans", fill={"files": hive_paths(files)}, **values)
    _scoped_messages(con, job, values)
    sqlfiles.execute(con, "raw/derive/scoped_raw_views")


def _scoped_messages(con, job: Job, values: dict) -> None:
    """The run's messages of the scope's time range (``values``' lo, hi: every scoped trace's spans start in it,
    and a message starts with its span) as _scoped_messages, read from the segments' row groups of that range
    alone (their start_ns statistics), for the tables derived from transcripts (rollout_flags)."""
    from rollscope.queries.reader import schema_file

    files = hive_paths([*map(str, job.messages), schema_file("messages")])
    sqlfiles.execute(con, "raw/scope_messages", fill={"files": files}, **values)


def _merge(
    con, job: Job, parts: dict[str, list[Path]], notes: dict, prior: _PriorSteps
) -> dict[str, list[Path]]:
    """Every table's parts after the catch-up, in TABLES order (a "rederive" table reads earlier ones); what
    the next catch-up builds on goes into ``notes`` (the manifest's meta)."""
    blocks = scope_blocks(con)
    tables: dict[str, list[Path]] = {}
    sqlfiles.execute(con, "raw/derive/train_spans_scoped")
    for table in TABLES:
        started = time.perf_counter()
        if table.blocked:
            tables[table.name] = _replace_rows(con, job, table.name, parts[table.name], blocks, prior)
        elif table.refresh == "whole":
            tables[table.name] = [write_whole(con, table.name, f"_{table.name}_mat", job.staging)]
        elif table.refresh == "merge":
            merge = sqlfiles.fragment(f"raw/merge_{table.name}")
            sqlfiles.execute(con, "raw/derive/merged_query", fill={"query": merge}, run=job.run_id)
            tables[table.name] = [write_whole(con, table.name, "_merged", job.staging)]
        elif table.refresh == "windows":
            tables[table.name] = refresh_windows(con, job, table, tables, parts[table.name], notes)
        elif table.refresh == "tail":
            tables[table.name] = refresh_tail(con, job, table, tables, parts)
        elif table.refresh == "quantiles":
            tables[table.name], tables[WINDOWS] = refresh_quantiles(
                con, job, table, tables, parts, blocks, notes
            )
        else:
            tables[table.name] = rederive(con, job, table, tables)
        log.debug("run %s: %s in %.2f s", job.run_id, table.name, time.perf_counter() - started)
    sqlfiles.execute(con, "raw/derive/index_deltas")
    sqlfiles.execute(con, _INDEX_MERGES["_traces"], fill={"target": "_idx_delta", "rows": "_idx_touched"})
    key_rows(con, "_keys_delta", "_idx_delta")
    for name, delta in (
        ("_traces", "_idx_delta"),
        ("_trace_keys", "_keys_delta"),
        ("_train_spans", "_train_delta"),
    ):
        tables[name] = _index_parts(con, job, name, parts[name], delta)
    return tables


def _index_parts(con, job: Job, name: str, old: list[Path], delta: str) -> list[Path]:
    """An index table's parts after a catch-up: the previous ones, and one of ``delta`` (none when it is empty):
    the rows of the traces the new spans touched (for the trace index: their rows over old and new spans merged,
    ``index_traces.sql``, which supersede the earlier rows: a lookup takes each trace's earliest start and latest end
    over every part), or the new train steps and weight syncs. Not the index rewritten whole, which grows with
    the run (the run's train spans, every step's, were 0.5 s of a catch-up at 30M spans).
    Parts are merged (``_INDEX_MERGES``) tier by tier like the blocked tables' (a part of ``rows`` rows is in tier
    ``floor(log_FANOUT(rows))``; ``FANOUT`` of one tier become one), so the index keeps under ``FANOUT`` parts
    per tier and a row is rewritten at most ``log_FANOUT(rows)`` times."""
    import pyarrow.parquet as pq

    parts = list(old)
    if _count(con, delta):
        parts.append(write_whole(con, name, delta, job.staging))
    while True:
        tiers: dict[int, list[Path]] = {}
        for part in parts:
            rows = max(pq.read_metadata(part).num_rows, 1)
            tiers.setdefault(int(math.log(rows, FANOUT) + 1e-9), []).append(part)
        full = next((group[:FANOUT] for group in tiers.values() if len(group) >= FANOUT), None)
        if full is None:
            return parts
        view(con, "_idx_merging", full, schema=delta)
        sqlfiles.execute(con, _INDEX_MERGES[name], fill={"target": "_idx_merged", "rows": "_idx_merging"})
        merged = write_whole(con, name, "_idx_merged", job.staging)
        parts = [p for p in parts if p not in full] + [merged]


def _count(con, relation: str) -> int:
    return sqlfiles.execute(
        con, "raw/derive/count_rows", fetch=sqlfiles.first_row, fill={"relation": relation}
    )["n"]


def _replace_rows(
    con, job: Job, name: str, parts: list[Path], blocks: set[str], prior: _PriorSteps
) -> list[Path]:
    """A blocked table's parts: those of the touched blocks rewritten, their rows of the scoped steps (a table
    without a step column: of the scoped rollouts) replaced by the scoped derivation's; the others reused."""
    mat = f"_{name}_mat"
    scope = IN_STEPS if "step" in column_names(con, mat) else _IN_ROLLOUTS
    old = [p for p in parts if holds(p, blocks)]
    relation = with_block(con, mat, scope)
    kept = [p for p in old if not (scope == _IN_ROLLOUTS and derived.part_block(p) == "p")]
    if kept:
        previous = sqlfiles.fragment(
            "raw/derive/replace_rows_kept", files=[str(p) for p in kept], scope=scope
        )
        relation = union(relation, previous)
    if pending := [p for p in old if p not in kept]:
        # Its rows of no consuming step (block p), each to the block of its rollout's step in the previous
        # state: p again, unless a full derivation wrote the table before the consuming steps were known
        # (derive_full until it waited for them), which left every row in p for each catch-up to rewrite
        # whole: the rows of consumed rollouts move to their steps' blocks here, once. (In any other state
        # their rollouts were asked for already, the scope reads block p of rollout_steps, and this reads
        # nothing.)
        files = [str(p) for p in pending]
        prior.fill(con, "raw/derive/prior_wanted_parts", files=files)
        moved = sqlfiles.fragment(
            "raw/derive/replace_rows_pending",
            files=files,
            scope=sqlfiles.Fragment(scope.replace("rollout_id", "o.rollout_id", 1)),
            block_steps=derived.BLOCK_STEPS,
        )
        relation = union(relation, moved)
    written = write_blocked(con, name, relation, job.staging)
    return consolidate(con, name, [p for p in parts if p not in old] + written, job.staging)
