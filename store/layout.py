"""The store on disk: the only code that knows its file layout, how segments are published and compacted.

Layout (Hive-style, so Spark/Trino/ClickHouse read the same files)::

    STORE/<dataset>/run_id=<run>/seg-<ms>-<writer>-<seq>.parquet   one batch from one writer
    STORE/<dataset>/run_id=<run>/cmp-<ms>-<writer>.parquet          a compaction of earlier segments
    STORE/<dataset>/run_id=<run>/.replaced/<name>.parquet           what a compaction replaced (grace period)

Why this shape: a DuckDB file admits one writer process and no concurrent reader, while immutable Parquet
segments written under a temporary name and published with ``os.replace`` let any number of writers and
readers work at once. A segment is visible whole or not at all. A compacted segment names the segments it
replaces in its footer (``rollscope.sources``); readers skip every segment so named, which makes the switch
atomic: before the compacted file is published readers use the sources, after it they use it alone. A second
after publishing (``RETIRE_AFTER_S``), the compactor renames the sources into ``run_id=<run>/.replaced/`` (a
hidden directory nobody lists), so a partition holds only what is live and listing it costs what is live, not
what is kept for slow readers. The footer rule covers the moments in between (and a compactor killed there);
the second covers listings, which are not snapshots (see ``_published``). Replaced files stay in
``.replaced/`` for a grace period: a reader that listed a file just before it moved finds it there
(:func:`resolve`) and reads the same rows, or lists again. Compaction itself (by `rollscope compact`, and by
the writers while a run is live) is ``rollscope.store.compaction``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from rollscope.errors import StoreError
from rollscope.settings import check_run_id
from rollscope.store import arrow_memory
from rollscope.store.schema import DATASET_NAMES

if TYPE_CHECKING:  # pyarrow is imported by the writers that need it: a reader never does
    import pyarrow as pa

SOURCES_KEY = b"rollscope.sources"
PARTITION_PREFIX = "run_id="
COMPACT_TARGET_ROWS = 2_000_000
# Small files a run may hold (beyond those derived) before the reader that derives it merges them first
# (``compaction.gather``): the writers' tiers leave about 50.
GATHER_FILES = 128
# Rows per Parquet row group in every file the store writes. Row groups keep min/max statistics, so a query
# bounded in time (one rollout's waterfall) reads the few row groups of that time and skips the rest; a merge
# buffers and sorts one row group at a time, so this also bounds its memory.
ROW_GROUP_ROWS = 131_072
# Messages are text, up to the capture cap each: row groups of that many would hold gigabytes, and one rollout's
# transcript is a few rows of one time range, so they are kept small.
MESSAGE_ROW_GROUP_ROWS = 8_192


def row_group_rows(dataset: str) -> int:
    """Rows per Parquet row group in the files of ``dataset``."""
    return MESSAGE_ROW_GROUP_ROWS if dataset == "messages" else ROW_GROUP_ROWS


# Codecs. A segment is written while a job or a receiver waits on it, and lives until the next compaction
# (seconds), so it is written with LZ4: measured on the TRL adapter's 820-span segment (71 columns) a zstd
# write took 3.2 ms of CPU and an LZ4 one 1.6 ms, for a file 15 % larger (42 KB against 37 KB); on a 20,000-span
# segment 13.5 ms against 17.5 ms, 46 % larger. Merged files, which stay, are written with zstd.
SEGMENT_COMPRESSION = "lz4"
COMPACTED_COMPRESSION = "zstd"
REPLACED_GRACE_S = 300.0
REPLACED_DIR = ".replaced"  # inside a run partition: files a merged file replaced, kept for the grace period
RETIRE_AFTER_S = 1.0  # a merged file's sources are moved aside this long after it appeared ...
SLOW_LISTING_S = RETIRE_AFTER_S / 2  # ... so a listing that took longer than this is taken again
LISTING_TRIES = 4


def partition_dir(store: Path | str, dataset: str, run_id: str) -> Path:
    return Path(store) / dataset / f"{PARTITION_PREFIX}{check_run_id(run_id)}"


class SegmentWriter:
    """Publishes Arrow tables as immutable segments. One per writing process (thread-safe)."""

    def __init__(
        self,
        store: Path | str,
        dataset: str = "spans",
        *,
        durable: bool = False,
        prefix: str = "seg",
        compact_seconds: float | None = None,
        dictionary: bool = True,
    ):
        """``compact_seconds``: when set, each run this writer publishes to is compacted in the background
        (tier by tier, about that often) by this process's compactor thread, and what is left unmerged when the
        writer closes (or the process exits) is merged then, from memory; see ``store.compaction``.
        ``dictionary=False`` writes every column plainly encoded (LZ4 still compresses it): for segments of a
        few thousand rows, written many times a second, dictionary encoding was a quarter of the Parquet
        write's CPU (most of it on columns of distinct numbers) and the files came out no smaller; compaction
        writes its merged files with dictionaries either way."""
        if dataset not in DATASET_NAMES:
            raise ValueError(f"unknown dataset {dataset!r}")
        self.store = Path(store)
        self.dataset = dataset
        self.durable = durable
        self.prefix = prefix
        self.compact_seconds = compact_seconds
        self.dictionary = dictionary
        self._writer = f"{os.getpid():x}{secrets.token_hex(3)}"
        self._seq = 0
        self._lock = threading.Lock()

    def publish(self, run_id: str, table: pa.Table, metadata: dict[bytes, bytes] | None = None) -> Path:
        """Write ``table`` under a temporary name and atomically make it visible."""
        directory = partition_dir(self.store, self.dataset, run_id)
        with self._lock:
            self._seq += 1
            name = f"{self.prefix}-{time.time_ns() // 1_000_000:013d}-{self._writer}-{self._seq:06d}.parquet"
        _make_dirs(directory, self.durable)
        if metadata:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
        with publishing(directory / name, self.durable) as sink:
            self.write(table, sink)
        if self.compact_seconds:
            from rollscope.store import compaction

            compaction.remember(directory / name, table)  # merged from memory, not read back
            compaction.watch(directory, self.compact_seconds, owner=self)
        return directory / name

    def write(self, table: pa.Table, sink) -> None:
        """``table`` as this writer's segments are written, to ``sink`` (a file, or memory: the receiver
        writes an empty one at start, so the first Parquet write's imports are not a request's)."""
        import pyarrow.parquet as pq  # a writer has it loaded already: a dictionary look-up

        pq.write_table(
            table,
            sink,
            compression=SEGMENT_COMPRESSION,
            row_group_size=row_group_rows(self.dataset),
            use_dictionary=self.dictionary,
            memory_pool=arrow_memory.pool(),  # not pyarrow's default: see rollscope.store.arrow_memory
        )

    def close(self) -> None:
        """Stop compacting the runs this writer published to (unless another writer still does), after a last
        merge of what it left unmerged (a second or two at most: ``compaction.final_merge``)."""
        if self.compact_seconds:
            from rollscope.store import compaction

            compaction.unwatch(self)


@contextmanager
def publishing(final: Path, durable: bool):
    """Yield a binary file written under a temporary name; on success it appears as ``final`` atomically."""
    with preparing(final, durable) as sink:
        yield sink
    publish_prepared(final, durable)


@contextmanager
def preparing(final: Path, durable: bool):
    """Yield a binary file written under ``final``'s temporary name, left there whole on success (removed on
    failure) for ``publish_prepared`` (or ``discard_prepared``): a merge writes its file before it takes the
    partition's lock, and only publishes under it."""
    tmp = _temporary(final)
    try:
        with open(tmp, "wb") as sink:
            yield sink
            if durable:
                sink.flush()
                os.fsync(sink.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def publish_prepared(final: Path, durable: bool) -> None:
    """Make a file ``preparing`` wrote appear as ``final``, atomically."""
    try:
        os.replace(_temporary(final), final)
    except BaseException:
        discard_prepared(final)
        raise
    if durable:
        _fsync_dir(final.parent)


def discard_prepared(final: Path) -> None:
    _temporary(final).unlink(missing_ok=True)


def _temporary(final: Path) -> Path:
    return final.with_name(f".{final.name}.tmp")


def _make_dirs(directory: Path, durable: bool) -> None:
    """Create the partition; when durable, fsync each new directory's parent so its entry survives a crash."""
    if directory.is_dir():
        return
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    directory.mkdir(parents=True, exist_ok=True)
    if durable:
        for created in reversed(missing):
            _fsync_dir(created.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading the layout -------------------------------------------------------------------------------------


def run_ids(store: Path | str, dataset: str = "spans") -> list[str]:
    root = Path(store) / dataset
    if not root.is_dir():
        return []
    return sorted(
        p.name[len(PARTITION_PREFIX) :] for p in root.iterdir() if p.name.startswith(PARTITION_PREFIX)
    )


def run_of(segment: Path | str) -> str:
    """The run a segment belongs to, from its partition directory."""
    return Path(segment).parent.name[len(PARTITION_PREFIX) :]


def _published(directory: Path) -> list[Path]:
    """The partition's published files (``published_names``)."""
    return [directory / n for n in published_names(directory)]


def published_names(directory: Path) -> list[str]:
    """The names of the partition's published files, sorted, from one listing that took less than
    ``SLOW_LISTING_S``.

    A directory listing is not a snapshot: it is read in pieces, and a file added or removed meanwhile may be
    missed. A listing that missed both a merged file that appeared and a source moved aside after it would
    have a gap; sources move ``RETIRE_AFTER_S`` after their merged file appears, so only a listing that took
    longer than that can; a slow one is taken again.

    Names, not paths: a partition that short-lived writers left 11,000 segments in was listed by each of
    them as it exited, and building and sorting a path for every file took most of their last merge's time."""
    for _ in range(LISTING_TRIES):
        started = time.monotonic()
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        if time.monotonic() - started < SLOW_LISTING_S:
            break
    return sorted(n for n in names if n.endswith(".parquet") and not n.startswith("."))


@lru_cache(maxsize=65536)
def _sources_of(path: str) -> frozenset[str]:
    """Names of the segments a compacted segment replaces (immutable once published, so cached); read where
    the file is now, in place or moved aside. FileNotFoundError (not cached) when it is gone from both."""
    for candidate in (path, str(replaced_path(path))):
        try:
            return _footer_sources(candidate)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):  # not Parquet (a foreign or damaged file): it replaces nothing
            return frozenset()
    raise FileNotFoundError(path)


# KeyValue{1: key, 2: value} in Parquet's footer (Thrift compact protocol): field 1, a string of 17 bytes.
_SOURCES_FIELD = b"\x18" + bytes([len(SOURCES_KEY)]) + SOURCES_KEY + b"\x18"


def _footer_sources(path: str) -> frozenset[str]:
    """The ``rollscope.sources`` entry of a Parquet footer, picked out of its bytes.

    A fresh reader reads the footer of every merged file of a run, hundreds of files of 2M spans after a
    week: ``pq.read_metadata`` parses each row group's statistics too (8 ms for a 2M-span file on the shared
    test machine), reading the bytes and finding the entry costs 0.1 ms. Anything unexpected (the entry
    absent, twice, or not JSON) falls back to the full parse."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - 8, 0))
        tail = f.read(8)
        length = int.from_bytes(tail[:4], "little")
        if tail[4:] != b"PAR1" or not 0 < length <= size - 12:
            raise ValueError(f"{path} is not a Parquet file")
        f.seek(size - 8 - length)
        footer = f.read(length)
    at = footer.find(_SOURCES_FIELD)
    if at >= 0 and footer.find(_SOURCES_FIELD, at + 1) < 0:
        start = at + len(_SOURCES_FIELD)
        length = shift = 0
        while start < len(footer):  # the value's length, a varint
            byte = footer[start]
            length |= (byte & 0x7F) << shift
            start, shift = start + 1, shift + 7
            if not byte & 0x80:
                try:
                    return frozenset(json.loads(footer[start : start + length]))
                except ValueError:
                    break
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path).metadata or {}
    return frozenset(json.loads(meta.get(SOURCES_KEY, b"[]")))


def sources(segment: Path | str) -> frozenset[str]:
    """The names of the files a compacted segment (``cmp-…``) replaces, in its own directory; empty for others.

    A reader that finds new compacted segments whose sources are exactly the segments that went away can keep
    what it derived from them: the rows are the same. A file gone for good (past the grace period) replaces
    nothing any listing still holds: empty."""
    try:
        return _replaced_by(Path(segment))
    except FileNotFoundError:
        return frozenset()


def _replaced_by(segment: Path) -> frozenset[str]:
    return _sources_of(str(segment)) if segment.name.startswith("cmp-") else frozenset()


def segments(store: Path | str, dataset: str = "spans", run_id: str | None = None) -> list[Path]:
    """The segments a reader should read now: published ones, minus those a compaction replaced, in path
    order (by run, then by name)."""
    runs = [run_id] if run_id is not None else run_ids(store, dataset)
    directories = [partition_dir(store, dataset, run) for run in sorted(runs)]
    return [d / name for d in directories for name in live_names(d)]


def live_names(directory: Path) -> list[str]:
    """The names of a partition's segments a reader should read now (``segments``), sorted: one listing
    minus what its merged files replace. A merged file gone from both its places by the time its footer is
    read belongs to a listing older than the grace period: list again."""
    for _ in range(LISTING_TRIES):
        names = published_names(directory)
        replaced: set[str] = set()
        try:
            for name in names:
                if name.startswith("cmp-"):  # a path built for the merged files only
                    replaced |= _replaced_by(directory / name)
        except FileNotFoundError:
            continue
        break
    return [n for n in names if n not in replaced]


def replaced_path(segment: Path | str) -> Path:
    """Where a compaction moves ``segment`` once a merged file replaces it (kept there for the grace period)."""
    segment = Path(segment)
    return segment.parent / REPLACED_DIR / segment.name


def resolve(listed: list[Path | str]) -> list[Path] | None:
    """The files of an earlier listing where they are now: in place, or moved aside by a compaction.

    The same files, so the same rows: a reader whose query failed because a compaction moved a file it had
    listed reads its listing again from here. None when one of them is gone for good (deleted after the grace
    period, or the run was removed): list again with :func:`segments`."""
    found = []
    for path in map(Path, listed):
        if not path.exists():
            path = replaced_path(path)
            if not path.exists():
                return None
        found.append(path)
    return found


def require_store(store: Path | str) -> Path:
    path = Path(store)
    if not path.exists():
        raise StoreError("No store", f"no rollscope store at {path} (nothing has been written there yet)")
    if not path.is_dir():
        raise StoreError("Not a store", f"{path} is a file, not a rollscope store directory")
    return path


# --- compaction (the code lives in rollscope.store.compaction) ----------------------------------------------


def compact(store: Path | str, run_id: str | None = None, **options):
    """Merge each run's segments into few large ones (see :func:`rollscope.store.compaction.compact`)."""
    from rollscope.store.compaction import compact as compact_store

    return compact_store(store, run_id, **options)


def unreadable_segment(store: Path | str, runs: list[str] | None = None) -> StoreError | None:
    """The error naming the first segment of ``runs`` (every run's by default) whose Parquet footer cannot be
    read, or None. What a reader or a compaction says, in place of pyarrow's or DuckDB's traceback, when a
    file in a run's partition is not a segment: a foreign writer that died mid-file (rollscope's own writers
    publish by rename, whole or not at all), a file copied in by hand. Reads every footer: for an error path."""
    import pyarrow.parquet as pq

    for dataset in DATASET_NAMES:
        for run in runs if runs is not None else run_ids(store, dataset):
            for path in segments(store, dataset, run):
                try:
                    pq.read_metadata(path)
                except FileNotFoundError:
                    continue  # compacted away since the listing: not this file's fault
                except Exception as e:  # pyarrow's ArrowInvalid, OSError: each its own words for one fault
                    reason = (
                        str(e).strip().split(". ")[0].splitlines()[0] if str(e).strip() else type(e).__name__
                    )
                    return StoreError(
                        "Unreadable segment",
                        f"{path} is not a readable Parquet segment ({reason}): move it out of {path.parent} "
                        "(nothing else refers to it) to read the run again",
                    )
    return None


def run_partitions(store: Path | str, run_id: str) -> list[Path]:
    """Every ``run_id=<run>`` directory under the store: raw datasets and derived ones at any depth."""
    wanted = f"{PARTITION_PREFIX}{check_run_id(run_id)}"
    found: list[Path] = []
    pending = [Path(store)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            if entry.name == wanted:
                found.append(Path(entry.path))
            elif not entry.name.startswith(PARTITION_PREFIX):  # other runs' partitions are never entered
                pending.append(Path(entry.path))
    return sorted(found, key=lambda p: (p.parent.name != "spans", str(p)))


def delete_run(store: Path | str, run_id: str) -> list[Path]:
    """Remove one run's raw and derived data; other runs, and their readers, are untouched.

    Each partition is first renamed out of sight (one atomic rename: readers see the run or nothing of it in
    that dataset), raw spans first so the run is unknown from the start, then deleted. A reader of the run
    that has a file open keeps reading it (POSIX keeps unlinked files alive); its next listing finds nothing.
    Returns the partitions removed (empty: the store holds no such run).
    """
    removed = []
    for partition in run_partitions(store, run_id):
        trash = partition.with_name(f".deleted-{partition.name}-{secrets.token_hex(4)}")
        try:
            os.replace(partition, trash)
        except FileNotFoundError:  # removed meanwhile by another rm
            continue
        removed.append((partition, trash))
    for _, trash in removed:
        shutil.rmtree(trash, ignore_errors=True)
    return [partition for partition, _ in removed]
