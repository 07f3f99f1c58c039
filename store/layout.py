"""The store on disk: the only code that knows its file layout, how segments are published and compacted.

Layout (Hive-style, so Spark/Trino/ClickHouse read the same files)::

    STORE/<dataset>/run_id=<run>/seg-<ms>-<writer>-<seq>.parquet   one batch from one writer
    STORE/<dataset>/run_id=<run>/cmp-<ms>-<writer>.parquet          a compaction of earlier segments

Why this shape: a DuckDB file admits one writer process and no concurrent reader, while immutable Parquet
segments written under a temporary name and published with ``os.replace`` let any number of writers and
readers work at once. A segment is visible whole or not at all. A compacted segment names the segments it
replaces in its footer (``rollscope.sources``); readers skip every segment so named, which makes the switch
atomic: before the compacted file is published readers use the sources, after it they use it alone. The
sources stay on disk for a grace period (deleted by a later compaction), so a reader that listed them just
before the switch can still finish its query.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rollscope.errors import StoreError
from rollscope.store.schema import DATASETS

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SOURCES_KEY = b"rollscope.sources"
PARTITION_PREFIX = "run_id="
COMPACT_TARGET_ROWS = 2_000_000
REPLACED_GRACE_S = 300.0


def check_run_id(run_id: str) -> str:
    """Run ids become directory names, so only a safe alphabet is accepted."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        raise ValueError(
            f"invalid run id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return run_id


def partition_dir(store: Path | str, dataset: str, run_id: str) -> Path:
    return Path(store) / dataset / f"{PARTITION_PREFIX}{check_run_id(run_id)}"


class SegmentWriter:
    """Publishes Arrow tables as immutable segments. One per writing process (thread-safe)."""

    def __init__(
        self, store: Path | str, dataset: str = "spans", *, durable: bool = False, prefix: str = "seg"
    ):
        if dataset not in DATASETS:
            raise ValueError(f"unknown dataset {dataset!r}")
        self.store = Path(store)
        self.dataset = dataset
        self.durable = durable
        self.prefix = prefix
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
        return _publish(directory / name, table, self.durable)


def _publish(final: Path, table: pa.Table, durable: bool) -> Path:
    tmp = final.with_name(f".{final.name}.tmp")
    try:
        with open(tmp, "wb") as sink:
            pq.write_table(table, sink, compression="zstd")
            if durable:
                sink.flush()
                os.fsync(sink.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(final.parent)
    return final


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
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [directory / n for n in names if n.endswith(".parquet") and not n.startswith(".")]


@lru_cache(maxsize=65536)
def _sources_of(path: str) -> frozenset[str]:
    """Names of the segments a compacted segment replaces (immutable once published, so cached)."""
    try:
        meta = pq.read_metadata(path).metadata or {}
    except (FileNotFoundError, OSError):
        return frozenset()
    return frozenset(json.loads(meta.get(SOURCES_KEY, b"[]")))


def segments(store: Path | str, dataset: str = "spans", run_id: str | None = None) -> list[Path]:
    """The segments a reader should read now: published ones, minus those a compaction replaced."""
    runs = [run_id] if run_id is not None else run_ids(store, dataset)
    chosen: list[Path] = []
    for run in runs:
        files = _published(partition_dir(store, dataset, run))
        replaced: set[str] = set()
        for f in files:
            if f.name.startswith("cmp-"):
                replaced |= _sources_of(str(f))
        chosen.extend(f for f in files if f.name not in replaced)
    return sorted(chosen)


def require_store(store: Path | str) -> Path:
    path = Path(store)
    if not path.exists():
        raise StoreError("No store", f"no rollscope store at {path} (nothing has been written there yet)")
    if not path.is_dir():
        raise StoreError("Not a store", f"{path} is a file, not a rollscope store directory")
    return path


# --- compaction ---------------------------------------------------------------------------------------------


@dataclass
class CompactResult:
    files_before: int = 0
    files_after: int = 0
    rows: int = 0
    runs: list[str] = field(default_factory=list)


@contextmanager
def _compaction_lock(store: Path):
    """Two compactions of one store would merge the same segments twice; the second waits."""
    with open(store / ".compact.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def compact(
    store: Path | str,
    run_id: str | None = None,
    *,
    target_rows: int = COMPACT_TARGET_ROWS,
    grace_seconds: float = REPLACED_GRACE_S,
) -> CompactResult:
    """Merge each run's segments into few large ones; readers never see duplicates or gaps."""
    root = require_store(store)
    result = CompactResult()
    with _compaction_lock(root):
        for dataset in DATASETS:
            for run in [run_id] if run_id else run_ids(root, dataset):
                directory = partition_dir(root, dataset, run)
                _delete_replaced(directory, grace_seconds)
                live = segments(root, dataset, run)
                result.files_before += len(live)
                result.files_after += _compact_partition(directory, live, target_rows, result)
                if run not in result.runs:
                    result.runs.append(run)
    return result


def _delete_replaced(directory: Path, grace_seconds: float) -> None:
    """Delete segments an earlier compaction replaced, once no reader can still be reading them."""
    files = _published(directory)
    cutoff = time.time() - grace_seconds
    replaced: set[str] = set()
    for f in files:
        if f.name.startswith("cmp-") and f.stat().st_mtime <= cutoff:
            replaced |= _sources_of(str(f))
    for f in files:
        if f.name in replaced:
            f.unlink(missing_ok=True)


def _compact_partition(directory: Path, live: list[Path], target_rows: int, result: CompactResult) -> int:
    batches = list(_batches(live, target_rows))
    after = 0
    for batch in batches:
        if len(batch) < 2:
            after += len(batch)
            continue
        table = pa.concat_tables([pq.read_table(p) for p in batch], promote_options="default")
        if "start_ns" in table.column_names:  # like spans side by side compress and prune better
            table = table.sort_by([("name", "ascending"), ("start_ns", "ascending")])
        sources = set().union(*(_sources_of(str(p)) for p in batch)) | {p.name for p in batch}
        name = f"cmp-{time.time_ns() // 1_000_000:013d}-{os.getpid():x}{secrets.token_hex(3)}.parquet"
        meta = {SOURCES_KEY: json.dumps(sorted(sources)).encode()}
        _publish(directory / name, table.replace_schema_metadata(meta), durable=True)
        result.rows += table.num_rows
        after += 1
    return after


def _batches(files: Iterable[Path], target_rows: int) -> Iterable[list[Path]]:
    batch: list[Path] = []
    rows = 0
    for f in files:
        n = pq.read_metadata(f).num_rows
        if batch and rows + n > target_rows:
            yield batch
            batch, rows = [], 0
        batch.append(f)
        rows += n
    if batch:
        yield batch


def delete_run(store: Path | str, run_id: str) -> bool:
    """Remove one run from every dataset; other runs are untouched."""
    found = False
    for dataset in DATASETS:
        directory = partition_dir(store, dataset, run_id)
        if directory.exists():
            shutil.rmtree(directory)
            found = True
    return found
