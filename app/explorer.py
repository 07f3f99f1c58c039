"""The SQL explorer's side of the dashboard: its sandboxed connection, the views and macros it lists, its SQL.

Apart from the cached calls (``app.calls``) because the explorer runs the user's SQL in a locked-down
connection of its own (``queries.sandbox``), not ``queries`` functions through the result cache.
"""

from __future__ import annotations

import streamlit as st

from rollscope.app.filters import Filters
from rollscope.app.readers import live_store
from rollscope.queries.catalog import VIEW_DOCS


@st.cache_resource(show_spinner=False, max_entries=8)
def sandbox(path: str, _first_run: str | None = None):
    """The SQL explorer's locked-down connection for this store (one, shared; queries run one at a time).

    It derives no run itself: its derived views hold the runs readers have derived (the one on screen is, by
    ``run_sql``). It opens with the run on screen alone (``_first_run``, the first page's to ask) and binds the
    store's other runs at the first query, so the page on a store of many runs costs the run shown, and a query
    still reads every run."""
    from rollscope.queries.sandbox import Sandbox

    return Sandbox(path, derive=False, first_run=_first_run)


def views() -> dict[str, str]:
    """The documented views and what each holds, for the SQL explorer."""
    return dict(VIEW_DOCS)


@st.cache_data(show_spinner=False)
def view_columns(path: str, _run_id: str) -> dict[str, list[str]]:
    """Each view's columns, from the SQL explorer's own connection (``Sandbox.columns``): the same for every
    store, and asking the connection the page already holds costs milliseconds, where opening a reader over an
    empty store to ask it cost ~2 s on a cold page. Cached, so a rerun never waits on the sandbox's lock behind
    a user's running query."""
    return sandbox(path, _run_id).columns()


def macros() -> dict[str, str]:
    """The table macros a query can call like a view, and what each returns."""
    from rollscope.queries.catalog import MACRO_DOCS

    return dict(MACRO_DOCS)


def sql_example() -> str:
    """The explorer's first query (``queries/sql/sandbox/example.sql``)."""
    from rollscope.queries import sqlfiles

    return sqlfiles.load("sandbox/example")


def run_sql(filters: Filters, sql: str):
    """The SQL explorer's query, in the sandbox (QueryError on refusal, failure or time limit), with the run on
    screen's derived state current."""
    live_store(filters.store).reader(filters.run_id).refresh()
    return sandbox(filters.store, filters.run_id).query(sql)
