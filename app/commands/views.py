"""`rollscope views`: the views as a SQL script, for the plain `duckdb` CLI or any DuckDB client."""

from __future__ import annotations

from rollscope.app.commands._common import add_store, store_of


def register(sub) -> None:
    p = sub.add_parser(
        "views",
        help="print SQL that defines the views, for the duckdb CLI",
        description="Print a SQL script defining every view over the store's current segments. "
        "Use: rollscope views --store runs > views.sql && duckdb -init views.sql",
    )
    add_store(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries.script import views_script

    print(views_script(store_of(args)))
    return 0
