"""`rollscope compact`: merge each run's small segments; safe while writers and readers run."""

from __future__ import annotations

from rollscope.app.commands._common import add_store, number, store_of


def register(sub) -> None:
    p = sub.add_parser(
        "compact",
        help="merge small segments into few large ones",
        description="Merge small segments. Readers never see duplicates or missing rows.",
    )
    add_store(p)
    p.add_argument("--run", default=None, metavar="ID", help="only this run (default: every run)")
    p.add_argument(
        "--grace",
        type=number(0),
        default=300.0,
        metavar="SECONDS",
        help="keep replaced segments this long for readers mid-query (default 300)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.store.layout import compact

    result = compact(store_of(args), args.run, grace_seconds=args.grace)
    print(f"compacted {len(result.runs)} run(s): {result.files_before} segments -> {result.files_after}")
    return 0
