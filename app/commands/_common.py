"""Arguments and output shared by several subcommands."""

from __future__ import annotations

import json
import sys

from rollscope.collectors.settings import default_store


def add_store(parser, *, default: str = "$ROLLSCOPE_STORE or ./runs") -> None:
    """The one --store option of every command; ``default`` says what an omitted one means."""
    parser.add_argument("--store", default=None, metavar="DIR", help=f"store directory (default: {default})")


def store_of(args):
    """The --store argument, else ROLLSCOPE_STORE, else ./runs; must exist for a reading command."""
    from rollscope.store.layout import require_store

    return require_store(args.store or default_store())


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
