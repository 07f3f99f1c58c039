"""`rollscope runs`: the runs in a store with their span counts and time span."""

from __future__ import annotations

from rollscope.app.commands._common import add_store, print_frame, store_of


def register(sub) -> None:
    p = sub.add_parser(
        "runs", help="list the runs in a store", description="List runs: spans, first/last time."
    )
    add_store(p)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries import sqlfiles
    from rollscope.queries.reader import Reader

    print_frame(sqlfiles.run(Reader(store_of(args), derive=False).con, "cli/runs"), args.format)
    return 0
