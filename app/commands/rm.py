"""`rollscope rm`: delete one run, raw spans and derived data together; other runs and their readers go on."""

from __future__ import annotations

from rollscope.app.commands._common import add_run, add_store, store_of
from rollscope.errors import RollscopeError, UnknownRunError


def register(sub) -> None:
    p = sub.add_parser(
        "rm",
        help="delete one run (raw and derived data)",
        description="Delete one run's raw spans, collector stats and derived tables. Other runs, and "
        "readers of them, are not affected; a reader of the deleted run then reports it unknown.",
    )
    add_store(p)
    add_run(p, help="the run to delete")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.store.layout import check_run_id, delete_run

    store = store_of(args)
    try:
        check_run_id(args.run)
    except ValueError as e:
        raise RollscopeError("Bad run id", str(e)) from None
    removed = delete_run(store, args.run)
    if not removed:
        raise UnknownRunError("Unknown run", f"no run {args.run!r} in {store} (`rollscope runs` lists them)")
    print(f"removed run {args.run}: {len(removed)} partition(s) under {store}")
    return 0
