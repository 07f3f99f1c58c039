"""The `rollscope` command line: argument parsing and error reporting; the work is in app/commands."""

from __future__ import annotations

import argparse
import sys

from rollscope.app.commands import COMMANDS
from rollscope.errors import RollscopeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollscope", description="Telemetry and observability for RL runs of LLM agents."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with _derive_progress(args):
            return int(args.func(args) or 0)
    except RollscopeError as e:
        print(f"rollscope: {e.title}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _derive_progress(args):
    """A bar on stderr while a command derives a run: when stderr is a terminal, or when --progress asks."""
    from contextlib import nullcontext

    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return nullcontext()
    from rollscope.app.commands._common import DeriveBar
    from rollscope.queries import derive

    return derive.progress(DeriveBar())


if __name__ == "__main__":
    sys.exit(main())
