"""Compaction: small segments merged into few large ones, by `rollscope compact` or by itself while a run is live.

One implementation, two planners over the same merge:

* **tiered** (automatic): a file's tier is ``floor(log_FANOUT(rows))``; when a tier of a run partition holds
  ``FANOUT`` files or more (files under ``target_rows``), they are merged into one, which lands at least a
  tier higher. Each span is therefore rewritten at most ``log_FANOUT(target_rows / rows per segment)`` times
  (5 for 50-row segments), and a partition holds at most ``FANOUT - 1`` files per tier plus its full files
  (``target_rows`` each): about 50 + spans / 2M, whatever the number of writers or the age of the run.
* **full** (`rollscope compact`): every live segment, in batches of ``target_rows``.

The switch is the one ``layout`` describes, in three steps, each safe to be killed after:

1. **publish** the merged file (``cmp-…``, one atomic rename); it names the files it replaces (its direct
   sources) in its footer, and readers skip every file so named: before the rename a reader reads the
   sources, after it the merged file alone.
2. **retire** the sources, ``RETIRE_AFTER_S`` (1 s) later, so that a directory listing begun before the
   merged file appeared has ended (a listing is not a snapshot: ``layout._published``): each is renamed into
   the partition's ``.replaced/`` directory (its mtime set to now first: the start of its grace period).
   Readers never list ``.replaced/``, so listing a partition costs its live files, not the files kept for
   slow readers. Sources are moved before any merged file that names them (a merged file can itself be a
   source), so a listing never shows a file whose replacement was already moved away. A compactor killed before or during this step leaves sources in the partition, still
   skipped by the footer rule; the next compaction of the partition finishes the step first (``settle``),
   before it plans anything, so a merged file is never merged again while its sources are still listed.
   Files replaced by an older rollscope, which left them in place, are moved aside the same way.
3. **sweep**: ``grace_seconds`` after a file was moved it is deleted (any order: nobody lists them).

A reader that listed a source just before it moved and opens it after gets "file not found": it reads the
same file from ``.replaced/`` (``layout.resolve``: the same listing, the same rows) or lists again; it never
sees a duplicate or a gap, because what it reads is always one listing's files. A reader holding a listing
for longer than the grace period (300 s) lists again.

Who compacts a run: every process whose ``SegmentWriter`` was given ``compact_seconds`` (the exporter and
the receiver, unless ``ROLLSCOPE_COMPACT=0``) runs one daemon thread that, every ``compact_seconds`` or so,
takes a non-blocking ``fcntl`` lock on each partition it wrote to and merges what its tiers call for: its own
segments first, from memory (``Written``), another process's once they are ``PATIENCE`` intervals old. Of 64
writers of a run one compacts at a time and the others skip; nothing ever waits on, or raises into, the job.
When a writer closes or its process exits, what it wrote and nobody merged is merged then, from memory, within
``FINAL_MERGE_S`` (``final_merge``). And a reader about to derive a run of many small segments (writers killed
before that, an older rollscope) merges them first (``gather``), reading several at a time.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import logging
import math
import os
import random
import secrets
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rollscope.store.layout import (
    COMPACT_TARGET_ROWS,
    COMPACTED_COMPRESSION,
    GATHER_FILES,
    REPLACED_DIR,
    REPLACED_GRACE_S,
    RETIRE_AFTER_S,
    SOURCES_KEY,
    _published,
    discard_prepared,
    live_names,
    partition_dir,
    preparing,
    publish_prepared,
    published_names,
    replaced_path,
    require_store,
    row_group_rows,
    run_ids,
    segments,
    sources,
    unreadable_segment,
)
from rollscope.store.schema import DATASET_NAMES

log = logging.getLogger("rollscope.compaction")

FANOUT = 8
MAX_MERGE_FILES = 4096
STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that died
LOCK_NAME = ".compact.lock"


@dataclass(frozen=True)
class Part:
    """What planning needs to know of a live file: its name (which sorts by publish time) and rows."""

    name: str
    rows: int


def tier(rows: int, fanout: int = FANOUT) -> int:
    return int(math.log(max(rows, 1), fanout) + 1e-9)


def plan_tiered(
    parts: Iterable[Part],
    *,
    fanout: int = FANOUT,
    target_rows: int = COMPACT_TARGET_ROWS,
    max_files: int = MAX_MERGE_FILES,
) -> list[Part]:
    """The files of the lowest tier holding ``fanout`` files or more (oldest first); [] when none does.

    Files are taken while their sum is under ``target_rows``, so a merge writes at most about twice that.
    """
    tiers: dict[int, list[Part]] = {}
    for part in parts:
        if part.rows < target_rows:
            tiers.setdefault(tier(part.rows, fanout), []).append(part)
    for level in sorted(tiers):
        group = sorted(tiers[level], key=_publish_order)
        if len(group) < fanout:
            continue
        chosen, rows = [], 0
        for part in group[:max_files]:
            if rows >= target_rows:
                break
            chosen.append(part)
            rows += part.rows
        if len(chosen) >= 2:
            return chosen
    return []


def plan_full(parts: Iterable[Part], *, target_rows: int = COMPACT_TARGET_ROWS) -> list[list[Part]]:
    """Every live file, in publish order, cut into batches of at most ``target_rows`` (singletons dropped)."""
    batches: list[list[Part]] = [[]]
    rows = 0
    for part in sorted(parts, key=_publish_order):
        if batches[-1] and rows + part.rows > target_rows:
            batches.append([])
            rows = 0
        batches[-1].append(part)
        rows += part.rows
    return [b for b in batches if len(b) >= 2]


def _publish_order(part: Part) -> tuple[str, str]:
    """Names are ``<prefix>-<ms>-…``: order by the publish time, whatever the prefix."""
    _, _, rest = part.name.partition("-")
    return rest, part.name


# --- one partition ------------------------------------------------------------------------------------------


@dataclass
class CompactResult:
    files_before: int = 0
    files_after: int = 0
    rows: int = 0  # rows written by merges
    merges: int = 0
    deleted: int = 0
    settled: int = 0  # sources moved aside that an interrupted compaction (or an older rollscope) left listed
    runs: list[str] = field(default_factory=list)


class Stopped(Exception):
    """The compactor was asked to stop (the process exits) in the middle of a merge; nothing was published."""


def compact_partition(
    directory: Path,
    *,
    mode: str = "tiered",
    wait: bool = False,
    grace_seconds: float = REPLACED_GRACE_S,
    target_rows: int = COMPACT_TARGET_ROWS,
    fanout: int = FANOUT,
    budget_seconds: float = 60.0,
    stop: threading.Event | None = None,
    result: CompactResult | None = None,
    retirements: Retirements | None = None,
    threads: int = 1,
    patience: float = 0.0,
    fresh_s: float = 0.0,
) -> CompactResult | None:
    """Settle and sweep, then merge one run partition's files and move what they replaced aside; None when
    another compactor holds it (``wait=False``). With ``retirements``, the moves are left to its ``finish``.
    ``threads`` read each merge's files ahead (`rollscope compact`; the background compactor reads in turn,
    beside the job). ``patience``: tiered, another process's files younger than this are left to it
    (``_tiered_batches``); ``fresh_s``: so are the moves of merges younger than this (``settle``)."""
    if mode not in ("tiered", "full"):
        raise ValueError(f"mode must be 'tiered' or 'full', not {mode!r}")
    result = result if result is not None else CompactResult()
    with partition_lock(directory, wait=wait) as held:
        if not held:
            return None
        result.settled += settle(directory, stop, fresh_s)
        result.deleted += sweep(directory, grace_seconds)
        listed = segments(*_split(directory))
        result.files_before += len(listed)
        if mode == "full":
            batches = plan_full(_parts(listed), target_rows=target_rows)
        else:
            batches = _tiered_batches(directory, fanout, target_rows, budget_seconds, stop, patience)
        after = len(listed)
        pending = retirements if retirements is not None else Retirements(stop)
        for batch in batches:
            pending.before_merging(directory, (p.name for p in batch))
            merged = merge(
                directory,
                [directory / p.name for p in batch],
                stop=stop,
                threads=threads,
                keep=mode == "tiered",
            )
            pending.add(directory, merged.name, [p.name for p in batch])
            WRITTEN.forget(directory / p.name for p in batch)
            result.merges += 1
            result.rows += sum(p.rows for p in batch)
            after -= len(batch) - 1
        result.files_after += after if mode == "full" else len(segments(*_split(directory)))
    if retirements is None:
        pending.finish()
    return result


class Retirements:
    """Sources of merges, moved aside once ``RETIRE_AFTER_S`` has passed since their merged file appeared (so
    any listing that began before it appeared has finished: ``layout._published``).

    A merged file that a later merge takes as a source has its own sources moved first (waiting if need be):
    a merged file is never replaced while its sources are still listed. Moving needs no lock (a source is
    moved once, by whoever comes first), so `rollscope compact` waits once for the whole store, not once per
    partition."""

    def __init__(self, stop: threading.Event | None = None):
        self.stop = stop
        self.waiting: list[
            tuple[float, Path, str, list[str]]
        ] = []  # (published at, partition, merged, sources)

    def add(self, directory: Path, merged: str, sources: list[str]) -> None:
        self.waiting.append((time.monotonic(), directory, merged, sources))
        self._retire(due_only=True)

    def before_merging(self, directory: Path, names: Iterable[str]) -> None:
        names = set(names)
        held = [t for t, d, merged, _ in self.waiting if d == directory and merged in names]
        if held:
            self._retire(until=max(held))

    def finish(self) -> None:
        if self.waiting:
            self._retire(until=self.waiting[-1][0])

    def _retire(self, *, due_only: bool = False, until: float = -math.inf) -> None:
        if not due_only and not _pause(until + RETIRE_AFTER_S - time.monotonic(), self.stop):
            raise Stopped  # the next compaction of the partition moves them (``settle``)
        now = time.monotonic()
        while self.waiting and (self.waiting[0][0] <= until or self.waiting[0][0] + RETIRE_AFTER_S <= now):
            _, directory, _, sources = self.waiting.pop(0)
            retire(directory, sources)


def _pause(seconds: float, stop: threading.Event | None) -> bool:
    """Sleep ``seconds`` (nothing when <= 0); False when asked to stop meanwhile."""
    if seconds <= 0:
        return not (stop and stop.is_set())
    if stop is None:
        time.sleep(seconds)
        return True
    return not stop.wait(seconds)


def _tiered_batches(directory, fanout, target_rows, budget_seconds, stop, patience=0.0):
    """Plans one merge at a time, re-reading the partition, until no tier is full or the budget is spent.

    The files this process wrote (``WRITTEN``: merged from memory) are planned first, on their own; another
    process's only once they are ``patience`` seconds old. A writer that compacts merges its own segments
    from memory in milliseconds, where reading another's back costs ~1 ms a file, and holding the partition's
    lock for that long (eight writers publishing as fast as they can leave thousands) kept their own merges,
    and their last merges at exit, waiting. What a writer that exited, was killed or does not compact leaves
    is merged once it is older than that."""
    deadline = time.monotonic() + budget_seconds
    while time.monotonic() < deadline and not (stop and stop.is_set()):
        now_ms = time.time() * 1000
        # A merged file younger than RETIRE_AFTER_S may still have its sources listed: merging it now would
        # wait for them (``Retirements.before_merging``), holding the lock; the next step takes it.
        young = now_ms - RETIRE_AFTER_S * 1000
        listed = [
            p
            for p in segments(*_split(directory))
            if not p.name.startswith("cmp-") or _published_ms(p.name) <= young
        ]
        listed = _mergeable(directory, listed)
        own = [p for p in listed if WRITTEN.get(p) is not None]
        batch = plan_tiered(_parts(own), fanout=fanout, target_rows=target_rows)
        if not batch:  # the footers of another's files are read only once they are due: their rows
            mine = {p.name for p in own}
            due = [p for p in listed if _published_ms(p.name) <= now_ms - patience * 1000 or p.name in mine]
            batch = plan_tiered(_parts(due), fanout=fanout, target_rows=target_rows)
        if not batch:
            return
        yield batch


def _published_ms(name: str) -> int:
    """When a file was published, from its name (``<prefix>-<ms>-…``); 0 (long ago) for a foreign name."""
    try:
        return int(name.split("-")[1])
    except (IndexError, ValueError):
        return 0


def _parts(files: list[Path]) -> list[Part]:
    return [Part(p.name, _rows(p)) for p in files]


def _split(directory: Path) -> tuple[Path, str, str]:
    return directory.parent.parent, directory.parent.name, directory.name.split("=", 1)[1]


def _rows(path: Path) -> int:
    table = WRITTEN.get(path)
    return table.num_rows if table is not None else _facts(str(path))[0]


def _schema(path: Path) -> pa.Schema:
    table = WRITTEN.get(path)
    return table.schema.remove_metadata() if table is not None else _facts(str(path))[1]


@lru_cache(maxsize=8192)
def _facts(path: str) -> tuple[int, pa.Schema]:
    """Rows and schema of a published file (immutable, so read once: planning and merging both need them)."""
    meta = pq.read_metadata(path)
    return meta.num_rows, meta.schema.to_arrow_schema().remove_metadata()


def merge(
    directory: Path,
    sources: list[Path],
    *,
    stop: threading.Event | None = None,
    threads: int = 1,
    keep: bool = False,
) -> Path:
    """Write ``sources`` as one file naming them in its footer, streaming: memory is one row group (and
    ``threads`` files read ahead). Moving the sources aside is the caller's (``Retirements``). ``keep``: a
    merged file small enough is kept in memory like the segments (``WRITTEN``), so a writer's compactor merges
    its own output again, tier after tier, without reading it back."""
    out = Output(directory, _unified(sources), keep=WRITTEN.limit // 4 if keep else 0)
    try:
        for _, table in read_in_order(sources, threads):
            if stop is not None and stop.is_set():
                raise Stopped
            out.add(table)
    except BaseException:
        out.abort()
        raise
    merged = out.close([p.name for p in sources])
    if out.kept is not None:
        WRITTEN.add(merged, out.kept)
    return merged


def _unified(sources: list[Path]) -> pa.Schema:
    """The schema a merge of ``sources`` is written with: every column of any of them."""
    schemas = {str(schema): schema for schema in map(_schema, sources)}
    return pa.unify_schemas(list(schemas.values()), promote_options="default")


class Output:
    """One merged file being written (``cmp-…``), a sorted row group at a time, published whole by ``close``,
    which names its sources in the footer; ``abort`` publishes nothing. ``finish`` and ``publish`` are
    ``close`` in two steps, for a merge that writes its file before it takes the partition's lock. Pieces are
    combined every ``COMBINE_PIECES``: thousands of tables of a few rows each, kept apart, held 7.5 GB for
    80,000 spans."""

    def __init__(self, directory: Path, schema: pa.Schema, keep: int = 0):
        """``keep``: the rows written are also kept (``kept``, a table) while their buffers are under this."""
        self.schema = schema.remove_metadata()
        self.keep = keep
        self._kept: list[pa.Table] | None = [] if keep else None
        self.path = (
            directory
            / f"cmp-{time.time_ns() // 1_000_000:013d}-{os.getpid():x}{secrets.token_hex(3)}.parquet"
        )
        self.group_rows = row_group_rows(_split(directory)[1])
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = self._combined = 0  # rows pending; pieces at the front combined already
        self._fitted = self.schema
        self._stack = ExitStack()
        sink = self._stack.enter_context(preparing(self.path, durable=True))
        try:
            self._out = self._stack.enter_context(
                pq.ParquetWriter(sink, self.schema, compression=COMPACTED_COMPRESSION)
            )
        except BaseException:
            self.abort()
            raise

    def fits(self, schema: pa.Schema) -> bool:
        """Whether a table of ``schema`` can go into this file (its columns are among the file's, same types)."""
        if schema.equals(self._fitted, check_metadata=False):
            return True
        fits = all(
            self.schema.get_field_index(f.name) >= 0 and self.schema.field(f.name).type == f.type
            for f in schema
        )
        if fits:
            self._fitted = schema
        return fits

    def add(self, table: pa.Table) -> None:
        self._pending.append(_conform(table, self.schema))
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        if len(self._pending) - self._combined >= COMBINE_PIECES:  # the newest pieces as one table
            recent = pa.concat_tables(self._pending[self._combined :]).combine_chunks()
            self._pending[self._combined :] = [recent]
            self._combined += 1
        if self._pending_rows >= self.group_rows:
            self._flush()

    def _flush(self) -> None:
        written = _write_group(self._out, self._pending)
        self._pending_rows = self._combined = 0
        if self._kept is not None and written is not None:
            self._kept.append(written)
            if sum(t.get_total_buffer_size() for t in self._kept) > self.keep:
                self._kept = None

    @property
    def kept(self) -> pa.Table | None:
        """Every row written, as written, when ``keep`` allowed it (None otherwise)."""
        return pa.concat_tables(self._kept) if self._kept else None

    def close(self, sources: list[str]) -> Path:
        self.finish(sources)
        return self.publish()

    def finish(self, sources: list[str]) -> None:
        """Write the last row group and the footer naming ``sources``: the file is whole, not yet published."""
        try:
            self._flush()
            self._out.add_key_value_metadata({SOURCES_KEY: json.dumps(sources).encode()})
        except BaseException:
            self.abort()
            raise
        self._stack.close()

    def publish(self) -> Path:
        publish_prepared(self.path, durable=True)
        return self.path

    def abort(self) -> None:
        """Publish nothing: the temporary file is removed."""
        self._stack.__exit__(Stopped, Stopped(), None)
        discard_prepared(self.path)


COMBINE_PIECES = 256
READ_AHEAD_BYTES = 32 << 20  # what the threads of ``read_in_order`` may have read ahead (file sizes)


def read_in_order(paths: list[Path], threads: int = 1) -> Iterator[tuple[Path, pa.Table]]:
    """Each file's rows, in order, ``threads`` reading ahead (pyarrow reads without the GIL).

    A small segment costs ~1 ms to read, most of it its footer (71 columns' metadata for a few rows), so a
    reader merging thousands reads several at once, up to ``READ_AHEAD_BYTES`` of files ahead; a file too
    large for that is read in turn, a row group at a time. This process's own segments come from memory
    (``WRITTEN``)."""
    if threads <= 1:
        for path in paths:
            yield from ((path, table) for table in _pieces(path))
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="rollscope-read") as pool:
        ahead: deque = deque()  # (path, its future or None: read in turn, its size)
        held = 0
        for path in paths:
            size = _size(path)
            small = size <= READ_AHEAD_BYTES // (4 * threads)
            ahead.append((path, pool.submit(_read_whole, path) if small else None, size if small else 0))
            held += ahead[-1][2]
            while ahead and (held > READ_AHEAD_BYTES or len(ahead) > 4 * threads or ahead[0][1] is None):
                held -= ahead[0][2]
                yield from _taken(ahead.popleft())
        while ahead:
            yield from _taken(ahead.popleft())


def _taken(entry) -> Iterator[tuple[Path, pa.Table]]:
    path, future, _ = entry
    for table in future.result() if future is not None else _pieces(path):
        yield path, table


def _read_whole(path: Path) -> list[pa.Table]:
    return list(_pieces(path))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0  # moved aside meanwhile: reading it says so


def _pieces(source: Path) -> Iterable[pa.Table]:
    """A segment this process wrote, from memory; a small file in one read (most are), a large one a row
    group at a time. The footer is parsed once (it is most of a small segment's read)."""
    table = WRITTEN.get(source)
    if table is not None:
        yield table
        return
    file = pq.ParquetFile(source)
    group_rows = row_group_rows(_split(source.parent)[1])
    if file.metadata.num_rows <= group_rows:
        yield file.read(use_threads=False)
        return
    for batch in file.iter_batches(batch_size=group_rows):
        yield pa.Table.from_batches([batch])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file written before a column existed gets it as nulls; columns come in the merged file's order."""
    if table.schema.equals(schema, check_metadata=False):
        return table.replace_schema_metadata(None) if table.schema.metadata else table
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _write_group(out: pq.ParquetWriter, pending: list[pa.Table]) -> pa.Table | None:
    """Write ``pending`` as one row group (like spans together, by time); returns it as written."""
    if not pending:
        return None
    table = pa.concat_tables(pending)
    pending.clear()
    if (
        "start_ns" in table.column_names and "name" in table.column_names
    ):  # like spans compress and prune better
        table = table.sort_by([("name", "ascending"), ("start_ns", "ascending")])
    out.write_table(table, row_group_size=max(table.num_rows, 1))
    return table


def retire(directory: Path, names: Iterable[str]) -> int:
    """Move replaced files (in this order) into ``.replaced/``, each stamped with the time it was replaced.

    The stamp comes before the rename: a kill in between leaves a live file with a new mtime, harmless. The
    directory is created without its parents: a run removed meanwhile (``rollscope rm``) is not recreated."""
    try:
        (directory / REPLACED_DIR).mkdir(exist_ok=True)
    except FileNotFoundError:  # the run was removed: nothing left to move
        return 0
    moved = 0
    for name in names:
        try:
            os.utime(directory / name)
            os.rename(directory / name, replaced_path(directory / name))
            moved += 1
        except FileNotFoundError:  # moved or deleted already (an older rollscope's sweep)
            continue
    return moved


def settle(directory: Path, stop: threading.Event | None = None, fresh_s: float = 0.0) -> int:
    """Finish what an interrupted compaction left: move aside every listed file that a listed merged file
    names, each before any merged file that names it (after ``RETIRE_AFTER_S``, as a merge does). Returns the
    number moved (0: nothing was left, the usual case, which costs one listing and no wait).

    ``fresh_s``: the sources of a merged file published less than that long ago (by its name) are left to its
    publisher, which moves them a second after publishing, and older ones are moved without waiting: a
    background step does not hold the partition's lock for a second each time another writer has just merged
    (eight short-lived writers' last merges queued behind each other's). Their merged files are not merged
    again meanwhile (``_mergeable``)."""
    files = {p.name: p for p in _published(directory)}
    settled_before = time.time() * 1000 - fresh_s * 1000
    replaced: set[str] = set()
    for name, path in files.items():
        if name.startswith("cmp-") and (not fresh_s or _published_ms(name) <= settled_before):
            replaced |= sources(path) & files.keys()
    if not replaced or not _pause(0.0 if fresh_s else RETIRE_AFTER_S, stop):
        return 0
    moved = 0
    while replaced:
        ready = [n for n in replaced if not (sources(files[n]) & replaced)]
        if not ready:  # a cycle cannot happen (a merged file is newer than its sources); never loop forever
            break
        moved += retire(directory, sorted(ready))
        replaced -= set(ready)
    return moved


def sweep(directory: Path, grace_seconds: float, now: float | None = None) -> int:
    """Delete the files moved aside at least ``grace_seconds`` ago, and writers' long-dead temporary files."""
    now = time.time() if now is None else now
    deleted = 0
    try:
        entries = list(os.scandir(directory / REPLACED_DIR))
    except FileNotFoundError:
        entries = []
    for entry in entries:
        try:
            if entry.stat().st_mtime <= now - grace_seconds:
                os.unlink(entry.path)
                deleted += 1
        except FileNotFoundError:
            continue
    _delete_stale_tmp(directory, now)
    return deleted


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return math.inf


def _delete_stale_tmp(directory: Path, now: float) -> None:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(".") and name.endswith(".tmp") and _mtime(directory / name) < now - STALE_TMP_S:
            (directory / name).unlink(missing_ok=True)


# --- locks --------------------------------------------------------------------------------------------------

_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@contextmanager
def partition_lock(directory: Path, *, wait: bool):
    """Yield True while holding the partition's compaction lock, False when it is held elsewhere.

    ``fcntl.lockf`` (POSIX record locks) is what NFS (through its lock manager) and Lustre (mounted with
    ``flock``) carry between hosts; it is per process, so threads of one process also take a local lock.
    """
    with _thread_locks_guard:
        local = _thread_locks.setdefault(str(directory), threading.Lock())
    if not local.acquire(blocking=wait):
        yield False
        return
    try:
        try:
            fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the run was deleted
            yield False
            return
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                yield False
                return
            yield True
        finally:
            os.close(fd)  # releases the record lock
    finally:
        local.release()


@contextmanager
def lock_within(directory: Path, seconds: float):
    """``partition_lock``, tried until it is had or ``seconds`` have passed: yields whether it is held. For
    the few who may wait a while, not forever: a reader about to derive, a writer's last merge at exit."""
    deadline = time.monotonic() + seconds
    while True:
        with partition_lock(directory, wait=False) as held:
            if held or time.monotonic() >= deadline:
                yield held
                return
        time.sleep(min(0.02, max(deadline - time.monotonic(), 0.0)))


# --- what this process wrote, merged from memory ------------------------------------------------------------

WRITTEN_BYTES = 32 << 20  # the most a writing process keeps of the segments it published, to merge them
FINAL_MERGE_S = 2.0  # the longest a writer's last merge (at close or exit) may take, lock and moves included
EXITING_MERGE_S = 0.2  # ... once the exit hook has had its last merge (a shutdown after it: the SDK's)
PATIENCE = 3  # compaction intervals another writer's files are left to it (``_tiered_batches``)
FRESH_S = 5.0  # a background step leaves the moves of merges this young to their publisher (``settle``)


class Written:
    """The tables this process published as segments, by file, until a merge replaces them (past
    ``WRITTEN_BYTES``, the oldest are forgotten first): merging them reads nothing.

    A short-lived writer that publishes as often as it can (a sandbox or judge worker flushing per rollout)
    leaves thousands of small segments when it exits before its compactor has merged them, and each costs a
    reader ~1 ms to read back, most of it the footer. From memory, its last merge (``final_merge``) of 1,400
    segments costs tens of milliseconds, where reading them back would cost the job's exit seconds."""

    def __init__(self, limit: int = WRITTEN_BYTES):
        self.limit = limit
        self._tables: OrderedDict[str, tuple[pa.Table, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def add(self, path: Path, table: pa.Table) -> None:
        size = table.get_total_buffer_size()
        with self._lock:
            self._tables[str(path)] = (table, size)
            self._bytes += size
            while self._bytes > self.limit:
                self._bytes -= self._tables.popitem(last=False)[1][1]

    def get(self, path: Path) -> pa.Table | None:
        entry = self._tables.get(str(path))
        return entry[0] if entry is not None else None

    def forget(self, paths: Iterable[Path]) -> None:
        with self._lock:
            for path in paths:
                entry = self._tables.pop(str(path), None)
                self._bytes -= entry[1] if entry is not None else 0

    def partitions(self) -> list[Path]:
        with self._lock:
            return sorted({Path(path).parent for path in self._tables})

    def files_in(self, directory: Path) -> list[Path]:
        with self._lock:
            return [Path(p) for p in self._tables if Path(p).parent == directory]


WRITTEN = Written()


def remember(path: Path, table: pa.Table) -> None:
    """A segment this process just published (by a writer that compacts: ``SegmentWriter``)."""
    WRITTEN.add(path, table)


def final_merge(partitions: list[Path] | None = None, seconds: float | None = None) -> int:
    """Merge what this process wrote and nobody merged yet into one file per partition (every partition it
    wrote to by default), from memory, and move the sources aside: a writer that exits leaves its segments
    merged. Bounded by ``seconds`` (``FINAL_MERGE_S``; a partition whose lock is not had by then is left for the next
    compaction or reader, and so are the moves when they no longer fit); never raises. Returns the merges."""
    seconds = FINAL_MERGE_S if seconds is None else seconds
    deadline = time.monotonic() + (min(seconds, EXITING_MERGE_S) if _exiting.is_set() else seconds)
    pending, merges = Retirements(), 0
    for directory in WRITTEN.partitions() if partitions is None else partitions:
        try:
            merges += _merge_written(directory, deadline, pending)
        except Exception:
            log.warning("rollscope: the last merge of %s failed", directory, exc_info=True)
    if pending.waiting and pending.waiting[-1][0] + RETIRE_AFTER_S <= deadline:
        try:
            pending.finish()
        except Exception:
            log.warning("rollscope: moving merged segments aside failed", exc_info=True)
    return merges


def _merge_written(directory: Path, deadline: float, pending: Retirements) -> int:
    """This process's segments still live in ``directory``, merged into one file: written first, then
    published under the partition's lock if every source is still live then (another compactor may have
    merged some meanwhile: then written again from those left, while time remains). The lock is held for a
    listing and a rename, not for the merge: on a loaded machine, eight writers' last merges had queued
    behind each other's writing."""
    while time.monotonic() < deadline:
        sources = _still_live(directory, WRITTEN.files_in(directory))
        if len(sources) < 2:
            return 0
        out = Output(directory, _unified(sources))
        try:
            for _, table in read_in_order(sources):
                if time.monotonic() > deadline:
                    return 0  # out of time: left as they are
                out.add(table)
            out.finish([p.name for p in sources])
            with lock_within(directory, deadline - time.monotonic()) as held:
                if held and _still_live(directory, sources) == sources:
                    pending.add(directory, out.publish().name, [p.name for p in sources])
                    WRITTEN.forget(sources)
                    return 1
        finally:
            out.abort()  # nothing, once published
        if not held:
            return 0
    return 0


def _still_live(directory: Path, files: list[Path]) -> list[Path]:
    """Those of ``files`` (this process's) still live and mergeable; the others are forgotten (merged by
    another compactor)."""
    live = set(live_names(directory)) if files else set()
    WRITTEN.forget(p for p in files if p.name not in live)
    return _mergeable(directory, [p for p in files if p.name in live])


# --- a reader's merge before it derives ----------------------------------------------------------------------

SMALL_BYTES = 4 << 20  # a file under this size is small
GATHER_WAIT_S = (
    60.0  # the longest a reader waits for a compactor holding the partition (a tiered step's budget)
)
READ_THREADS = min(4, os.cpu_count() or 1)


def gather(
    store: Path | str, run_id: str, live: list[Path], retirements: Retirements, derived: Iterable[str] = ()
) -> list[Path]:
    """The run's live span segments, once the small ones (not in ``derived``) are merged, when there are
    ``GATHER_FILES`` of them or more; ``live`` itself otherwise.

    What a reader does before deriving a run of many small files (writers that exited, or were killed, before
    their compactors ran): merged, 11,000 segments of a few spans each are read once, several at a time,
    where a derivation over them read each again for every table it builds (344 s and 11.6 GB for 80,000
    spans). The merge is a compaction's: under the partition's lock, published with one rename, its sources
    named in its footer, and moved aside by ``retirements`` (the caller finishes it once it has derived,
    which takes longer than the second it waits). Memory: one row group and what is read ahead. A store this
    process cannot write, a file that is not a segment, ``ROLLSCOPE_COMPACT=0``: ``live`` as it is."""
    derived = frozenset(derived)
    if len(live) < GATHER_FILES or not _gathering() or len(_small(live, derived)) < GATHER_FILES:
        return live
    directory = partition_dir(store, "spans", run_id)
    try:
        with lock_within(directory, GATHER_WAIT_S) as held:
            if not held:
                return live
            small = _mergeable(directory, _small(segments(store, "spans", run_id), derived))
            if len(small) >= GATHER_FILES:
                _merge_streaming(directory, small, retirements)
    except (OSError, pa.ArrowInvalid) as e:  # a read-only store, a file that is not a segment
        log.info("rollscope: run %s's small segments are read as they are: %s", run_id, e)
    return segments(store, "spans", run_id)


def _mergeable(directory: Path, files: list[Path]) -> list[Path]:
    """``files`` but the merged ones whose sources are still listed (moved aside a second after their merged
    file appeared): a merged file is never merged again while its sources are listed (``settle`` says why).
    Left for a later merge, rather than waiting for the moves with the partition's lock held."""
    merged = [p for p in files if p.name.startswith("cmp-")]
    if not merged:
        return files
    listed = set(published_names(directory))
    waiting = {p for p in merged if sources(p) & listed}
    return [p for p in files if p not in waiting]


def _gathering() -> bool:
    from rollscope.settings import Settings

    return Settings.resolve().compact


def _small(live: list[Path], derived: frozenset[str]) -> list[Path]:
    """The live files under ``SMALL_BYTES`` not in ``derived``, in publish order."""
    small = [p for p in live if p.name not in derived and _size(p) < SMALL_BYTES]
    return sorted(small, key=lambda p: _publish_order(Part(p.name, 0)))


def _merge_streaming(directory: Path, small: list[Path], retirements: Retirements) -> None:
    """``small`` merged in publish order into files of up to ``COMPACT_TARGET_ROWS`` rows, a new one where a
    file's columns do not fit the one being written (written by another version)."""
    out, sources = None, []
    try:
        for path, table in read_in_order(small, READ_THREADS):
            if (
                out is not None
                and (path.name not in sources[-1:])
                and (out.rows >= COMPACT_TARGET_ROWS or not out.fits(table.schema))
            ):
                _publish(directory, out, sources, retirements)
                out, sources = None, []
            if out is None:
                out = Output(directory, table.schema)
            out.add(table)
            if sources[-1:] != [path.name]:
                sources.append(path.name)
    except BaseException:
        if out is not None:
            out.abort()
        raise
    if out is not None:
        _publish(directory, out, sources, retirements)


def _publish(directory: Path, out: Output, sources: list[str], retirements: Retirements) -> None:
    if len(sources) < 2:  # one file merged into one: nothing gained
        out.abort()
        return
    retirements.add(directory, out.close(sources).name, sources)


# --- the whole store (`rollscope compact`) ------------------------------------------------------------------


def compact(
    store: Path | str,
    run_id: str | None = None,
    *,
    target_rows: int = COMPACT_TARGET_ROWS,
    grace_seconds: float = REPLACED_GRACE_S,
    mode: str = "full",
) -> CompactResult:
    """Merge each run's segments (every dataset); waits for a compactor already working on a partition.

    The replaced files move aside once for the whole store, a second after the last merge; then what is older
    than ``grace_seconds`` goes (with 0, everything this call replaced)."""
    root = require_store(store)
    result = CompactResult()
    retirements = Retirements()
    compacted = []
    for dataset in DATASET_NAMES:
        for run in [run_id] if run_id else run_ids(root, dataset):
            directory = partition_dir(root, dataset, run)
            if not directory.is_dir():
                continue
            try:
                compact_partition(
                    directory,
                    mode=mode,
                    wait=True,
                    grace_seconds=grace_seconds,
                    target_rows=target_rows,
                    result=result,
                    retirements=retirements,
                    threads=READ_THREADS,
                )
            except pa.ArrowInvalid as e:  # a file there that is not a segment: one line naming it
                unreadable = unreadable_segment(root, [run])
                if unreadable is None:
                    raise
                raise unreadable from e
            compacted.append(directory)
            if run not in result.runs:
                result.runs.append(run)
    retirements.finish()
    for directory in compacted:
        result.deleted += sweep(directory, grace_seconds)
    return result


# --- the background compactor -------------------------------------------------------------------------------


class AutoCompactor:
    """One daemon thread per process compacting, tier by tier, the partitions this process writes to."""

    def __init__(self, grace_seconds: float = REPLACED_GRACE_S):
        self.grace_seconds = grace_seconds
        self.partitions: dict[Path, dict[int, float]] = {}  # partition -> {writer id: its interval}
        self.result = CompactResult()
        self.failures = 0
        self._failed_in: Counter[Path] = Counter()  # failures per partition, which the log's throttle counts
        self._due: dict[Path, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, directory: Path, interval: float, owner: object) -> None:
        with self._lock:
            if directory not in self.partitions:
                self._due[directory] = time.monotonic() + _jittered(interval)
            self.partitions.setdefault(directory, {})[id(owner)] = interval
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="rollscope-compact", daemon=True)
                self._thread.start()

    def unwatch(self, owner: object) -> list[Path]:
        """Stop compacting for ``owner``; returns the partitions nobody in this process writes to any more."""
        left = []
        with self._lock:
            for directory, owners in list(self.partitions.items()):
                if owners.pop(id(owner), None) is not None and not owners:
                    del self.partitions[directory]
                    self._due.pop(directory, None)
                    left.append(directory)
        return left

    def _loop(self) -> None:
        _lower_priority()
        while not self._stop.is_set():
            with self._lock:
                wait = min(self._due.values(), default=time.monotonic() + 1.0) - time.monotonic()
            if self._stop.wait(min(max(wait, 0.0), 1.0)):
                return
            self.tick(only_due=True)

    def tick(self, only_due: bool = False) -> None:
        """Compact every watched partition (that is due) this process can lock now; never raises."""
        now = time.monotonic()
        with self._lock:
            partitions = [d for d in sorted(self.partitions) if not only_due or self._due[d] <= now]
            intervals = {d: min(self.partitions[d].values()) for d in partitions}
            for d in partitions:
                self._due[d] = now + _jittered(intervals[d])
        for directory in partitions:
            if self._stop.is_set():
                return
            try:
                compact_partition(
                    directory,
                    grace_seconds=self.grace_seconds,
                    stop=self._stop,
                    result=self.result,
                    patience=PATIENCE * intervals[directory],
                    fresh_s=FRESH_S,
                )
            except Stopped:
                return
            except Exception as e:
                self._failed(directory, e)

    def _failed(self, directory: Path, error: Exception) -> None:
        self.failures += 1
        if not directory.is_dir():  # the run was deleted: stop watching it
            with self._lock:
                self.partitions.pop(directory, None)
                self._due.pop(directory, None)
            return
        # The first three of each partition, then one in a hundred: a new run's bad file is always reported,
        # however many failures an earlier one logged in this process.
        self._failed_in[directory] += 1
        if self._failed_in[directory] <= 3 or self._failed_in[directory] % 100 == 0:
            root, _, run = _split(directory)
            unreadable = isinstance(error, pa.ArrowInvalid) and unreadable_segment(root, [run])
            if unreadable:  # a file there that is not a segment: the job's log gets the one line
                log.warning("rollscope: background compaction of %s stopped: %s", directory, unreadable)
            else:
                log.warning("rollscope: background compaction of %s failed", directory, exc_info=True)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop at the next file boundary; a merge cut short publishes nothing."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


# Its own generator: the module's is the job's, which seeds it and draws from it (a training run's shuffles);
# a draw from this thread in the middle of training would change what the job draws next.
_JITTER = random.Random()


def _jittered(interval: float) -> float:
    """Writers of one run try at spread-out moments rather than all at once."""
    return interval * _JITTER.uniform(0.5, 1.5)


def _lower_priority() -> None:
    """The compactor thread yields the CPU to the job (Linux niceness is per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


_compactor: AutoCompactor | None = None
_compactor_guard = threading.Lock()


def watch(directory: Path, interval: float, owner: object) -> None:
    """Have this process's compactor keep ``directory`` (one run partition) compacted while ``owner`` writes."""
    global _compactor
    with _compactor_guard:
        if _compactor is None:
            _compactor = AutoCompactor()
    _compactor.watch(directory, interval, owner)


def unwatch(owner: object) -> None:
    """``owner`` stopped writing (exporter shut down): its partitions are no longer compacted for it, and
    those nobody else in this process writes to get their last merge (``final_merge``)."""
    if _compactor is not None:
        final_merge(_compactor.unwatch(owner))


def compactor() -> AutoCompactor | None:
    """This process's background compactor, if a writer started one."""
    return _compactor


def _forget_in_child() -> None:
    global _compactor, _compactor_guard, _thread_locks, _thread_locks_guard, WRITTEN
    _compactor = None  # its thread did not survive the fork; the child starts its own when it publishes
    WRITTEN = Written()  # the parent's segments are the parent's to merge
    _JITTER.seed()  # else the child's writers would pick the parent's moments
    _compactor_guard, _thread_locks, _thread_locks_guard = threading.Lock(), {}, threading.Lock()


_exiting = threading.Event()


@atexit.register
def _stop_at_exit() -> None:
    """Stop the compactor at its next file boundary, then merge what this process wrote in the partitions it
    still writes to (``final_merge``: those of writers never closed; a closed one had its last merge). A
    writer closed after this (the SDK's own exit hook shuts its exporter down later) merges only briefly."""
    if _compactor is not None:
        _compactor.stop()
        final_merge(sorted(_compactor.partitions))
    _exiting.set()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
