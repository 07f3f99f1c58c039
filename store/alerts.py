"""A run's alert state, kept in the store beside its segments: what `rollscope watch` last saw of each check rule
and every change it saw, so a watch that restarts sends no alert twice and the Health page can show them.

    STORE/alerts/run_id=<run>/state.json    {"format": 1, "rules": {...}, "events": [...]}
    STORE/alerts/run_id=<run>/.lock         held by the one watch of the run (fcntl.flock)

``rules`` maps each rule to its last verdict (``{"ok": bool, "since_ns": int}``); ``events`` lists the changes,
oldest first (each a dict the watch builds: id, rule, state, time, message, delivered ...), the newest
``MAX_EVENTS`` kept. The file is replaced atomically (``layout.publishing``), so a reader sees the previous state
or the next, never half of one; `rollscope rm` deletes it with the run's other partitions. An unreadable file
(hand-edited, from a newer format) is refused with a clear error rather than overwritten: it holds what was sent.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rollscope.errors import StoreError
from rollscope.store import layout

ALERTS_DIR = "alerts"
STATE = "state.json"
FORMAT = 1
MAX_EVENTS = 1000  # the newest changes kept (a rule flapping every minute for a day is ~1,400)


def run_dir(store: Path | str, run_id: str) -> Path:
    return Path(store) / ALERTS_DIR / f"{layout.PARTITION_PREFIX}{layout.check_run_id(run_id)}"


def state_path(store: Path | str, run_id: str) -> Path:
    return run_dir(store, run_id) / STATE


def empty() -> dict:
    return {"format": FORMAT, "rules": {}, "events": []}


def load(store: Path | str, run_id: str) -> dict:
    """The run's alert state; ``empty()`` when no watch has written one."""
    path = state_path(store, run_id)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return empty()
    except (OSError, ValueError) as e:
        raise StoreError("Unreadable alert state", f"{path}: {e}") from e
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise StoreError("Unreadable alert state", f"{path} is not an alert state of format {FORMAT}")
    return state


def save(store: Path | str, run_id: str, state: dict) -> None:
    """Replace the run's alert state atomically, keeping its newest ``MAX_EVENTS`` events."""
    path = state_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {**state, "format": FORMAT, "events": state.get("events", [])[-MAX_EVENTS:]}
    with layout.publishing(path, durable=True) as sink:
        sink.write(json.dumps(kept, indent=1).encode())


@contextmanager
def watching(store: Path | str, run_id: str) -> Iterator[None]:
    """Hold the run's watch lock while the body runs: two watches of one run would each send every alert."""
    directory = run_dir(store, run_id)
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                "Run already watched", f"another `rollscope watch` holds {directory / '.lock'}"
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
