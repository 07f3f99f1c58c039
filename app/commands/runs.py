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

    store = store_of(args)
    frame = sqlfiles.run(Reader(store, derive=False).con, "cli/runs")
    if frame.empty and args.format == "table":  # csv and json stay parseable: a header, an empty array
        print(f"no runs in {store} yet")
        return 0
    print_frame(frame, args.format)
    return 0
