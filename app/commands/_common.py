"""Arguments and output shared by several subcommands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

from rollscope.errors import StoreError, UnknownRunError
from rollscope.settings import default_store

T = TypeVar("T")


def add_store(parser, *, default: str = "$ROLLSCOPE_STORE or ./runs") -> None:
    """The one --store option of every command; ``default`` says what an omitted one means."""
    parser.add_argument("--store", default=None, metavar="DIR", help=f"store directory (default: {default})")


def add_progress(parser) -> None:
    """--progress, of the commands that open a run: its first open derives it, minutes for a long one."""
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show a run's derivation on stderr even when it is not a terminal (a terminal always shows it)",
    )


class DeriveBar:
    """A one-line bar on stderr while a run is derived (``queries.derive.progress``'s listener): what is being
    derived, how far, about how long is left. Drawn once a derivation has taken a second (a catch-up of a few
    new spans shows nothing), redrawn at most five times a second on a terminal, a line every ten seconds
    otherwise; stdout is never touched, so piped output stays clean."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.started: float | None = None
        self.drawn = 0.0
        self.width = 0

    def __call__(self, run: str, fraction: float, what: str, left: float | None) -> None:
        import time

        now = time.monotonic()
        if self.started is None or fraction == 0.0:
            self.started, self.drawn = now, 0.0
        done = fraction >= 1.0
        if not done and (now - self.started < 1.0 or now - self.drawn < (0.2 if self.tty else 10.0)):
            return
        self.drawn = now
        from rollscope.formats import seconds

        eta = "" if left is None or done else f", about {seconds(left)} left"
        line = f"deriving run {run} [{'#' * int(fraction * 24):<24}] {fraction:4.0%} {what}{eta}"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width) + ("\n" if done else ""))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def add_run(parser, *, help: str | None = None, optional: bool = False) -> None:
    """The --run option of the commands that read or change one run. ``optional``: a command that reads may
    leave it out when the store holds one run (``on_run`` takes that one); one that deletes may not."""
    if help is None:
        help = "run id (`rollscope runs` lists them)" + (
            "; may be left out when the store holds one" if optional else ""
        )
    parser.add_argument("--run", required=not optional, metavar="ID", help=help)


def step_range(text: str) -> tuple[int, int]:
    """``--steps A:B``: train steps A to B, both included."""
    lo, sep, hi = text.partition(":")
    try:
        steps = int(lo), int(hi)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A:B (two train steps), not {text!r}") from None
    if not sep or steps[0] > steps[1]:
        raise argparse.ArgumentTypeError(f"expected A:B with A <= B, not {text!r}")
    return steps


def port_number(lowest: int = 0) -> Callable[[str], int]:
    """The argparse type of a TCP port, ``lowest`` to 65535 (0: any free one, where the command allows it)."""

    def parse(text: str) -> int:
        if not text.strip().isdigit() or not lowest <= int(text) <= 65535:
            raise argparse.ArgumentTypeError(f"a port is {lowest}-65535, not {text!r}")
        return int(text)

    return parse


def number(lowest: float, *, whole: bool = False, above: bool = False) -> Callable[[str], float]:
    """The argparse type of a number of at least ``lowest`` (more than it with ``above``), an integer with
    ``whole`` ("1e6" is one too): a bad value is a usage error naming the option, not a traceback."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):  # "nan" and "inf" parse as floats
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        if whole:
            if not value.is_integer():
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
            value = int(value)
        if value < lowest or (above and value == lowest):
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if above else 'at least'} {lowest}, not {text}"
            )
        return value

    return parse


def name_value(names: Callable[[], Iterable[str]]) -> Callable[[str], tuple[str, float]]:
    """The argparse type of a repeatable ``NAME=VALUE`` setting (``--threshold``, ``--what-if``): NAME one
    of ``names()`` (called when an argument is parsed, so that starting the CLI imports no queries), VALUE a
    number."""

    def parse(text: str) -> tuple[str, float]:
        allowed = list(names())
        name, sep, value = text.partition("=")
        if not sep or name not in allowed:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME one of {', '.join(allowed)}")
        try:
            return name, float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {value!r} is not a number") from None

    return parse


def store_of(args):
    """The --store argument, else ROLLSCOPE_STORE, else ./runs; must exist for a reading command."""
    from rollscope.store.layout import require_store

    return require_store(args.store or default_store())


def on_run(args, compute: Callable[..., T]) -> T:
    """``compute(con)`` on a connection to ``args.run``'s store, asked once more after a new listing when a
    compaction deleted a file the first had listed (``Reader.retrying``): a file a compaction replaced outlives
    readers for its grace period only, and a command slower than that (a busy machine, a large run) lost the
    race."""
    from rollscope.queries.reader import Reader

    store = store_of(args)
    if args.run is None:
        args.run = only_run(store)
    reader = Reader(store, run_id=args.run)
    return reader.retrying(lambda: compute(reader.con))


def only_run(store) -> str:
    """The store's one run, for a reading command given no --run; else a one-line error saying what to give."""
    from rollscope.store.layout import run_ids

    runs = run_ids(store)
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise StoreError("No runs", f"no runs in {store} yet: nothing to read")
    shown = ", ".join(runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
    raise UnknownRunError("Which run", f"{store} holds {len(runs)} runs ({shown}): give one with --run ID")


def print_frame(frame, fmt: str = "table", out=None) -> None:
    """A DataFrame as an aligned table, CSV or a JSON array of objects."""
    out = out or sys.stdout
    if fmt == "csv":
        frame.to_csv(out, index=False)
    elif fmt == "json":
        records = json.loads(frame.to_json(orient="records", date_format="iso", default_handler=str))
        json.dump(records, out, indent=2)
        out.write("\n")
    elif frame.empty:
        out.write("(no rows)\n" if len(frame.columns) else "OK\n")
    else:
        out.write(frame.to_string(index=False, na_rep="NULL") + "\n")
