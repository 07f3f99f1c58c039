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
takes a non-blocking ``fcntl`` lock on each partition it wrote to and merges what its tiers call for. Of 64
writers of a run one compacts at a time and the others skip; nothing ever waits on, or raises into, the job.
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
from collections import Counter
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rollscope.store.layout import (
    COMPACT_TARGET_ROWS,
    COMPACTED_COMPRESSION,
    REPLACED_DIR,
    REPLACED_GRACE_S,
    RETIRE_AFTER_S,
    SOURCES_KEY,
    _published,
    partition_dir,
    publishing,
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
) -> CompactResult | None:
    """Settle and sweep, then merge one run partition's files and move what they replaced aside; None when
    another compactor holds it (``wait=False``). With ``retirements``, the moves are left to its ``finish``."""
    if mode not in ("tiered", "full"):
        raise ValueError(f"mode must be 'tiered' or 'full', not {mode!r}")
    result = result if result is not None else CompactResult()
    with partition_lock(directory, wait=wait) as held:
        if not held:
            return None
        result.settled += settle(directory, stop)
        result.deleted += sweep(directory, grace_seconds)
        live = _parts(directory)
        result.files_before += len(live)
        if mode == "full":
            batches = plan_full(live, target_rows=target_rows)
        else:
            batches = _tiered_batches(directory, fanout, target_rows, budget_seconds, stop)
        after = len(live)
        pending = retirements if retirements is not None else Retirements(stop)
        for batch in batches:
            pending.before_merging(directory, (p.name for p in batch))
            merged = merge(directory, [directory / p.name for p in batch], stop=stop)
            pending.add(directory, merged.name, [p.name for p in batch])
            result.merges += 1
            result.rows += sum(p.rows for p in batch)
            after -= len(batch) - 1
        result.files_after += after if mode == "full" else len(_parts(directory))
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


def _tiered_batches(directory, fanout, target_rows, budget_seconds, stop):
    """Plans one merge at a time, re-reading the partition, until no tier is full or the budget is spent."""
    deadline = time.monotonic() + budget_seconds
    while time.monotonic() < deadline and not (stop and stop.is_set()):
        batch = plan_tiered(_parts(directory), fanout=fanout, target_rows=target_rows)
        if not batch:
            return
        yield batch


def _parts(directory: Path) -> list[Part]:
    return [Part(p.name, _facts(str(p))[0]) for p in segments(*_split(directory))]


def _split(directory: Path) -> tuple[Path, str, str]:
    return directory.parent.parent, directory.parent.name, directory.name.split("=", 1)[1]


@lru_cache(maxsize=8192)
def _facts(path: str) -> tuple[int, pa.Schema]:
    """Rows and schema of a published file (immutable, so read once: planning and merging both need them)."""
    meta = pq.read_metadata(path)
    return meta.num_rows, meta.schema.to_arrow_schema().remove_metadata()


def merge(directory: Path, sources: list[Path], *, stop: threading.Event | None = None) -> Path:
    """Write ``sources`` as one file naming them in its footer, streaming: memory is one row group. Moving
    the sources aside is the caller's (``Retirements``)."""
    schemas = {str(schema): schema for schema in (_facts(str(p))[1] for p in sources)}
    schema = pa.unify_schemas(list(schemas.values()), promote_options="default")
    schema = schema.with_metadata({SOURCES_KEY: json.dumps([p.name for p in sources]).encode()})
    name = f"cmp-{time.time_ns() // 1_000_000:013d}-{os.getpid():x}{secrets.token_hex(3)}.parquet"
    final = directory / name
    group_rows = row_group_rows(_split(directory)[1])
    with (
        publishing(final, durable=True) as sink,
        pq.ParquetWriter(sink, schema, compression=COMPACTED_COMPRESSION) as out,
    ):
        pending: list[pa.Table] = []
        for source in sources:
            if stop is not None and stop.is_set():
                raise Stopped
            for table in _pieces(source, group_rows):
                if stop is not None and stop.is_set():
                    raise Stopped
                pending.append(_conform(table, schema))
                if sum(t.num_rows for t in pending) >= group_rows:
                    _write_group(out, pending)
        _write_group(out, pending)
    return final


def _pieces(source: Path, group_rows: int) -> Iterable[pa.Table]:
    """A small file in one read (most are), a large one a row group at a time."""
    if _facts(str(source))[0] <= group_rows:
        yield pq.ParquetFile(source).read(use_threads=False)
        return
    for batch in pq.ParquetFile(source).iter_batches(batch_size=group_rows):
        yield pa.Table.from_batches([batch])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file written before a column existed gets it as nulls; columns come in the merged file's order."""
    if table.schema.remove_metadata().equals(schema, check_metadata=False):
        return table.replace_schema_metadata(schema.metadata)
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _write_group(out: pq.ParquetWriter, pending: list[pa.Table]) -> None:
    if not pending:
        return
    table = pa.concat_tables(pending)
    pending.clear()
    if (
        "start_ns" in table.column_names and "name" in table.column_names
    ):  # like spans compress and prune better
        table = table.sort_by([("name", "ascending"), ("start_ns", "ascending")])
    out.write_table(table, row_group_size=max(table.num_rows, 1))


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


def settle(directory: Path, stop: threading.Event | None = None) -> int:
    """Finish what an interrupted compaction left: move aside every listed file that a listed merged file
    names, each before any merged file that names it (after ``RETIRE_AFTER_S``, as a merge does). Returns the
    number moved (0: nothing was left, the usual case, which costs one listing and no wait)."""
    files = {p.name: p for p in _published(directory)}
    replaced: set[str] = set()
    for name, path in files.items():
        if name.startswith("cmp-"):
            replaced |= sources(path) & files.keys()
    if not replaced or not _pause(RETIRE_AFTER_S, stop):
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

    def unwatch(self, owner: object) -> None:
        with self._lock:
            for directory, owners in list(self.partitions.items()):
                owners.pop(id(owner), None)
                if not owners:
                    del self.partitions[directory]
                    self._due.pop(directory, None)

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
            for d in partitions:
                self._due[d] = now + _jittered(min(self.partitions[d].values()))
        for directory in partitions:
            if self._stop.is_set():
                return
            try:
                compact_partition(
                    directory, grace_seconds=self.grace_seconds, stop=self._stop, result=self.result
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
    """``owner`` stopped writing (exporter shut down): its partitions are no longer compacted for it."""
    if _compactor is not None:
        _compactor.unwatch(owner)


def compactor() -> AutoCompactor | None:
    """This process's background compactor, if a writer started one."""
    return _compactor


def _forget_in_child() -> None:
    global _compactor, _compactor_guard, _thread_locks, _thread_locks_guard
    _compactor = None  # its thread did not survive the fork; the child starts its own when it publishes
    _JITTER.seed()  # else the child's writers would pick the parent's moments
    _compactor_guard, _thread_locks, _thread_locks_guard = threading.Lock(), {}, threading.Lock()


@atexit.register
def _stop_at_exit() -> None:
    if _compactor is not None:
        _compactor.stop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
