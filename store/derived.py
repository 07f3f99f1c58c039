"""Derived datasets: what the analyses read, kept in the store on disk as Parquet (``queries/tables.py`` declares them).

Raw segments hold every span; the analyses read a handful of small tables derived from them (one row per
rollout, per step, per turn group, ...). Those tables are kept on disk next to the raw data, so any process
can open a run of any length without holding it in memory, and published atomically like raw segments::

    STORE/derived/run_id=<run>/manifest.json         the published state: every table's parts, the segments
    STORE/derived/run_id=<run>/parts/<table>/b=<block>/<token>.parquet   immutable parts, shared by states
    STORE/derived/run_id=<run>/.lock                  held by the one process catching up
    STORE/derived/run_id=<run>/.tmp-<token>/          parts being written (never read)

A table of scope "rollout", "trace" or "step" is kept as one part per block of ``BLOCK_STEPS`` consuming
steps (``b=<step // BLOCK_STEPS>``) and one for what no step has consumed yet (``b=p``); a "run" table as one
part (``b=all``), except those whose refresh rewrites only their newest steps' rows ("windows", "tail"), which
are kept in blocks of steps too (their rows of no step, or of the whole run, in ``b=p``). The manifest also keeps
what an incremental catch-up builds on: the derived index (``_traces``:
per trace and rollout its time range and group, one part per catch-up of the traces it touched, merged tier by
tier, each part sorted by trace; ``_trace_keys``: each rollout and group id with the traces holding it, kept the
same way, sorted by id, so that a catch-up looks the index up by key, ``store/keyed.py``; ``_train_spans``: the
raw train step and weight sync spans), the windows run_percentiles is kept with
(``_quantile_windows``: the values next to each exact percentile), each segment's time range, the run's
staleness bound, whether its trainer records rl.sample decisions, and every table's columns and types (the
next catch-up creates its tables from them rather than binding every definition, seconds of fixed cost).

A reader reads ``manifest.json``, which names every part and the raw span segments they were derived from.
The manifest is replaced with ``os.replace`` only after every part it names is in place, so a reader sees a
whole state or the previous one, never a mix. ``kill -9`` at any moment leaves a stale ``.tmp-*`` directory or
parts no manifest names (both removed by the next catch-up); the manifest still names complete parts, and the
next open catches up. Parts the new manifest drops are listed in it as retired and deleted ``GRACE_S`` later by
a later catch-up (a reader that read the previous manifest may still read them); a named part never is.

Catch-up (``catch_up``): a reader that finds segments the manifest does not name takes the run's lock
(``fcntl.flock``; a second process does not derive the same run at the same time) and calls the derive
function the caller gives (``queries.derive``: DuckDB, under a memory limit, spilling to disk) with the
previous state. That function derives one of three ways:

* **tables**, when the previous state holds every live segment but some tables' definition digests
  (``catch_up``'s ``definitions``) differ from the reader's and each of those reads only derived tables: those
  tables are derived again from the others' parts, which are kept.
* **incremental**, whenever the previous state is of this ``FORMAT`` and nothing below says otherwise: the
  scope the new segments can change (their rollouts and traces, those rollouts' groups and steps, every rollout
  and trace of those steps and of the not-yet-consumed step, the new train steps), derived from that scope's
  spans alone (found through the trace index and the segments' time ranges, not by scanning the run), and each
  table's rows of the scoped steps (or rollouts) replaced: only the parts of the touched blocks are rewritten,
  the others reused by path; "run" tables are refreshed by their ``refresh`` rule (``queries/tables.py``).
* **full** (the reference): every table from every span of the run, when there is no previous state of this
  ``FORMAT``, a derived segment vanished without a compaction, a compaction merged derived and new segments and
  a new one is gone already (while the compaction keeps them aside, the new rows are read from them),
  the new spans outnumber the derived ones, the run's first rl.sample of a rollout arrives (step timing switches
  to recorded decisions), the staleness bound rises, an rl.rollout / rl.reward / rl.judge span of no rollout
  arrives (or ever did), a train step arrives whose data was ready before the newest one's (in a run without
  recorded decisions), a "run" table has no ``refresh`` rule, or the scope keeps growing.

A reader that cannot take the lock either reads the last published state (``wait=False``, the dashboard's
live refresh) or waits for the holder and reads what it published (``wait=True``, the CLI).

A compaction merges segments without changing rows: a compacted segment whose sources were all derived from
(followed down through the merges it merged again, ``first_sources``) counts as derived, so compaction never
triggers a catch-up. A segment that disappears otherwise (a run
rewritten, a source deleted) does, in full.

When the store is not writable (e.g. the ``sample_data`` shipped inside an installed package), derived data
goes to a per-user cache directory (``$ROLLSCOPE_CACHE``, else ``$XDG_CACHE_HOME/rollscope``, else
``~/.cache/rollscope``), keyed by the store's absolute path; a published state in the store itself is still
read when it is current.

Every table is derived from raw segments alone, so the whole ``derived/`` directory can be deleted at any time:
the next open derives it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rollscope import settings
from rollscope.store import layout

DERIVED_DIR = "derived"
MANIFEST = "manifest.json"
FORMAT = (
    13  # bump when the layout changes: manifests of an older format are derived again (a table's definition
    # change needs no bump: each manifest keeps every table's definition digest, queries/definitions.py)
)
GRACE_S = 300.0  # how long a retired part stays on disk for readers that listed it
PARTS = "parts"  # parts/<table>/b=<block>/<name>.parquet, immutable, shared by the generations naming them
BLOCK_STEPS = settings.environment("block_steps")  # consuming steps per part of a blocked table


@dataclass(frozen=True)
class Published:
    """A run's published derived state: where its tables' parts are and which raw segments they hold."""

    run_id: str
    root: Path  # the run's derived directory
    generation: str
    segments: frozenset[str]  # names of the raw span segments derived from
    derived_at: float
    tables: dict = field(default_factory=dict, compare=False)  # name -> [part path relative to root]
    meta: dict = field(default_factory=dict, compare=False)  # what an incremental catch-up builds on
    how: str = field(default="full", compare=False)  # how it was derived: "full" or "incremental"

    def files(self) -> dict[str, list[Path]]:
        """Every table's (and index's) Parquet parts."""
        return {name: [self.root / rel for rel in parts] for name, parts in self.tables.items()}

    def file_names(self) -> dict[str, list[str]]:
        """``files()`` as strings, joined without pathlib: a reader of a hundred runs names ~12,000 parts, and
        building a Path of each cost it a second (the manifest's relative paths use "/")."""
        root = str(self.root)
        return {name: [f"{root}/{rel}" for rel in parts] for name, parts in self.tables.items()}


# --- where derived data lives ---------------------------------------------------------------------------------


def store_root(store: Path | str) -> Path:
    return Path(store) / DERIVED_DIR


def cache_root(store: Path | str) -> Path:
    """The per-user directory used when the store itself is not writable."""
    key = hashlib.sha1(str(Path(store).resolve()).encode()).hexdigest()[:16]
    return settings.cache_dir() / DERIVED_DIR / key


def roots(store: Path | str) -> list[Path]:
    """Where a run's derived state may be, in the order it is looked for."""
    return [store_root(store), cache_root(store)]


def run_dir(root: Path, run_id: str) -> Path:
    return root / f"{layout.PARTITION_PREFIX}{layout.check_run_id(run_id)}"


def _writable_root(store: Path | str) -> Path:
    for root in roots(store):
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe = root / f".probe-{secrets.token_hex(4)}"
            probe.touch()
            probe.unlink()
            return root
        except OSError:
            continue
    fallback = Path(tempfile.gettempdir()) / f"rollscope-{os.getuid()}" / cache_root(store).name
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


# --- reading the published state --------------------------------------------------------------------------------


def published(root: Path, run_id: str) -> Published | None:
    """The run's manifest under ``root`` (None when there is none, it is unreadable or of an older format)."""
    directory = run_dir(root, run_id)
    try:
        data = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if data.get("format") != FORMAT or not isinstance(data.get("tables"), dict):
        return None
    return Published(
        run_id,
        directory,
        data["generation"],
        frozenset(data.get("segments", [])),
        data.get("derived_at", 0.0),
        data["tables"],
        data.get("meta", {}),
        data.get("how", "full"),
    )


def up_to_date(state: Published, live: list[Path], definitions: dict | None = None) -> bool:
    """Whether ``state`` was derived from exactly the rows of the run's ``live`` span segments (and, given
    ``definitions``, each table's definition digest, by the definitions the reader's code has:
    ``queries/definitions.py``).

    A compacted segment counts as derived when every segment it replaces was (followed down through an earlier
    compaction's merged file, kept aside for a grace period: the writers compact while a run is live, and merge
    their merges again); every derived segment must be live or replaced by a live compacted one (a vanished
    segment means rows went away).
    """
    if definitions is not None and state.meta.get("definitions") != definitions:
        return False
    covered: set[str] = set()
    for path in live:
        if path.name in state.segments:
            covered.add(path.name)
            continue
        sources = set(first_sources(path, state.segments))
        if not sources or not sources <= state.segments:
            return False
        covered |= sources
    return covered == state.segments


def first_sources(path: Path, known: frozenset[str] = frozenset()) -> dict[str, Path | None]:
    """The segments a compacted segment replaces, followed down through the merged files it replaces (in
    place or kept aside by the compaction) to segments no compaction made or named in ``known``: each name
    with its file (None for a name in ``known``, not looked for, and for a source gone for good, which stays
    as its own name); empty for a segment no compaction made."""
    found: dict[str, Path | None] = {}
    for name in layout.sources(path):
        where = None if name in known else layout.resolve([partition_of(path) / name])
        deeper = first_sources(where[0], known) if where else {}
        found.update(deeper or {name: where[0] if where else None})
    return found


def partition_of(segment: Path) -> Path:
    """The run partition a segment is in (a segment kept aside by a compaction is one level down)."""
    return segment.parent.parent if segment.parent.name == layout.REPLACED_DIR else segment.parent


def current(
    store: Path | str, run_id: str, live: list[Path] | None = None, definitions: dict | None = None
) -> Published | None:
    """The run's published state that holds every live segment (and has ``definitions``, when given),
    wherever it is (None: a catch-up is due)."""
    live = layout.segments(store, "spans", run_id) if live is None else live
    for root in roots(store):
        state = published(root, run_id)
        if state is not None and up_to_date(state, live, definitions):
            return state
    return None


def latest(store: Path | str, run_id: str) -> Published | None:
    """The most recently derived published state of the run, current or not."""
    states = [s for s in (published(root, run_id) for root in roots(store)) if s is not None]
    return max(states, key=lambda s: s.derived_at, default=None)


# --- catching up ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One catch-up, as the derive function (``queries.derive``) sees it."""

    run_id: str
    live: list[Path]  # the run's live span segments, all of which the result must hold
    staging: Path  # where new parts are written: ``<table>/b=<block>/<name>.parquet``
    previous: Published | None  # the state to build on (None: derive from scratch)
    # The run's live message segments, listed after ``live``: a writer publishes a span's messages before the
    # span, so they hold the messages of every span of ``live`` (and perhaps of spans published since).
    messages: list[Path] = field(default_factory=list)


@dataclass
class Result:
    """What a derive function made: every table's parts (new ones under the staging directory, reused ones
    as the previous state's paths), what the next catch-up needs (``meta``) and how (full or incremental)."""

    tables: dict[str, list[Path]]
    meta: dict
    how: str = "full"


# derive(job) -> Result: write every derived table (and the index the next catch-up reads) for job.live; the
# store keeps the tables it is given, by name, and never needs the catalogue (queries/tables.py).
Derive = Callable[[Job], Result]


def block_of(step) -> str:
    """The block label of a consuming step: parts hold ``BLOCK_STEPS`` steps each; ``p``: not consumed yet."""
    return "p" if step is None else str(int(step) // BLOCK_STEPS)


def part_block(path: Path | str) -> str:
    """The block a part holds, from its directory: ``b=<block>``, ``b=<first>_<last>`` (blocks merged by a
    consolidation), ``b=p`` (not consumed yet) or ``b=all`` (a "run" table)."""
    return Path(path).parent.name.removeprefix("b=")


def part_range(path: Path | str) -> tuple[int, int] | None:
    """The first and last block a part of consumed steps holds (None: ``p`` or ``all``)."""
    label = part_block(path)
    if label in ("p", "all"):
        return None
    first, _, last = label.partition("_")
    return (int(first), int(last or first))


def holds(path: Path | str, blocks: set[str]) -> bool:
    """Whether a part may hold rows of any of ``blocks`` (labels of ``block_of``)."""
    spans = part_range(path)
    if spans is None:
        return part_block(path) in blocks
    return any(b != "p" and spans[0] <= int(b) <= spans[1] for b in blocks)


def catch_up(
    store: Path | str, run_id: str, derive: Derive, *, wait: bool = True, definitions: dict | None = None
) -> tuple[Published | None, str]:
    """Bring the run's derived state up to date with its raw segments (and with ``definitions``, each table's
    definition digest, when given: a state derived by other definitions is derived again, the tables whose
    digest changed); returns it and what was done.

    What was done: ``"current"`` (nothing to do), ``"derived"`` (this process derived it), ``"waited"``
    (another process was deriving; this one waited and read its result) or ``"stale"`` (another process is
    deriving and ``wait`` is False: the last published state, which may lack the newest segments).
    """
    live = layout.segments(store, "spans", run_id)
    if not live:
        return None, "current"
    state = current(store, run_id, live, definitions)
    if state is not None:
        return state, "current"
    root = _writable_root(store)
    directory = run_dir(root, run_id)
    directory.mkdir(parents=True, exist_ok=True)
    with _run_lock(directory, wait=wait) as (held, waited):
        if not held:
            return latest(store, run_id), "stale"
        live = layout.segments(store, "spans", run_id)  # what the holder before us published may cover them
        state = current(store, run_id, live, definitions)
        if state is not None:
            return state, "waited" if waited else "current"
        _clean(directory)
        previous = published(root, run_id)
        with _gathered(store, run_id, live, previous) as live:
            staging = directory / f".tmp-{secrets.token_hex(6)}"
            staging.mkdir()
            try:
                messages = layout.segments(store, "messages", run_id)
                result = derive(Job(run_id, live, staging, previous, messages))
                tables = _keep(directory, staging, result.tables)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            shutil.rmtree(staging, ignore_errors=True)
            _publish_manifest(directory, run_id, live, tables, result, previous)
        return published(root, run_id), "derived"


@contextmanager
def _gathered(store: Path | str, run_id: str, live: list[Path], previous: Published | None):
    """The run's live segments with its many small ones merged first (``compaction.gather``), their sources
    moved aside once the body (the derivation) is done."""
    if len(live) < layout.GATHER_FILES:  # the usual case: nothing to merge, pyarrow not imported
        yield live
        return
    from rollscope.store import compaction

    moves = compaction.Retirements()
    try:
        yield compaction.gather(store, run_id, live, moves, _derived_from(previous, live))
    finally:
        moves.finish()


def _derived_from(previous: Published | None, live: list[Path]) -> set[str]:
    """The live segments ``previous`` holds: named in it, or merged by a compaction from segments it names."""
    if previous is None:
        return set()
    held = {p.name for p in live if p.name in previous.segments}
    for path in live:
        if path.name not in held and path.name.startswith("cmp-"):
            sources = first_sources(path, previous.segments)
            if sources and set(sources) <= previous.segments:
                held.add(path.name)
    return held


def _keep(directory: Path, staging: Path, tables: dict[str, list[Path]]) -> dict[str, list[str]]:
    """Move the new parts from ``staging`` into ``parts/`` (renames: nothing is published until the manifest
    names them) and return every table's parts relative to the run's directory."""
    kept: dict[str, list[str]] = {}
    for name, parts in tables.items():
        kept[name] = []
        for part in parts:
            if part.is_relative_to(staging):
                target = directory / PARTS / part.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(part, target)
                part = target
            kept[name].append(str(part.relative_to(directory)))
    return kept


def _publish_manifest(directory, run_id, live, tables, result: Result, previous: Published | None) -> None:
    """Replace the manifest atomically; the parts the previous one named and this one does not are retired,
    deleted ``GRACE_S`` later by a later catch-up (a reader that read the previous manifest may still read them)."""
    now = time.time()
    named = {rel for parts in tables.values() for rel in parts}
    retired: dict[str, float] = {}
    if previous is not None:
        retired = {rel: t for rel, t in previous.meta.get("retired", {}).items() if rel not in named}
        for parts in previous.tables.values():
            retired.update({rel: now for rel in parts if rel not in named and rel not in retired})
    manifest = {
        "format": FORMAT,
        "run_id": run_id,
        "generation": f"gen-{time.time_ns() // 1_000_000:013d}-{secrets.token_hex(3)}",
        "tables": tables,
        "segments": sorted(p.name for p in live),
        "derived_at": now,
        "how": result.how,
        "meta": {**result.meta, "retired": retired},
    }
    tmp = directory / f".{MANIFEST}.{secrets.token_hex(4)}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, directory / MANIFEST)


@contextmanager
def _run_lock(directory: Path, *, wait: bool):
    """The run's catch-up lock: yields (held, waited)."""
    with open(directory / ".lock", "a+") as handle:
        waited = False
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False, False
                return
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = True
        try:
            yield True, waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _clean(directory: Path, grace_s: float = GRACE_S) -> None:
    """Under the lock: remove interrupted catch-ups, parts the manifest neither names nor retired less than
    ``grace_s`` ago, and generation directories of older formats replaced more than ``grace_s`` ago."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        manifest = {}
    tables = manifest.get("tables") if isinstance(manifest.get("tables"), dict) else {}
    keep = {rel for parts in tables.values() for rel in parts}
    cutoff = time.time() - grace_s
    keep |= {rel for rel, t in manifest.get("meta", {}).get("retired", {}).items() if t >= cutoff}
    for entry in directory.iterdir():
        interrupted = entry.name.startswith(".tmp-")
        replaced = entry.name.startswith("gen-") and entry.stat().st_mtime < cutoff
        if interrupted or replaced:
            shutil.rmtree(entry, ignore_errors=True)
    parts = directory / PARTS
    if parts.is_dir() and manifest.get("format") == FORMAT:
        for part in parts.rglob("*.parquet"):
            if str(part.relative_to(directory)) not in keep:
                part.unlink(missing_ok=True)


def delete_run(store: Path | str, run_id: str) -> bool:
    """Remove a run's derived data (in the store and in the user's cache); raw data is layout's."""
    found = False
    for root in roots(store):
        directory = run_dir(root, run_id)
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
            found = True
    return found
