"""`rollscope sql`: one query against the documented views."""

from __future__ import annotations

from rollscope.app.commands._common import add_progress, add_store, print_frame, store_of


def register(sub) -> None:
    p = sub.add_parser(
        "sql",
        help="run one SQL query against the store's views",
        description="Run one SQL statement against the views (spans, rollouts, turns, ...). An empty "
        "query or several statements is an error: run statements one at a time.",
    )
    add_store(p)
    add_progress(p)
    p.add_argument("query", help='e.g. "SELECT environment, count(*) FROM rollouts GROUP BY 1"')
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def run(args) -> int:
    from rollscope.queries.reader import Reader
    from rollscope.queries.sandbox import one_statement

    one_statement(
        args.query, syntax_title="Query failed"
    )  # blank, comment-only or several statements: a one-line error
    reader = Reader(store_of(args))
    print_frame(reader.sql(args.query), args.format)
    return 0
