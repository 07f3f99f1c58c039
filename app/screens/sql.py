"""SQL: an explorer over the documented views, sandboxed (read-only, the store only, row and time limits)."""

import streamlit as st

from rollscope.app import charts, explorer, page_frame
from rollscope.app.filters import Filters
from rollscope.errors import QueryError

RESULT = "sql-result"


def views(filters: Filters) -> None:
    st.markdown("**Views**")
    columns = explorer.view_columns(filters.store, filters.run_id)
    for view, what in explorer.views().items():
        with st.expander(f"`{view}`: {what}"):
            st.caption(", ".join(f"`{c}`" for c in columns.get(view, [])))
    st.markdown("**Table macros** (call them like a view)")
    for macro, what in explorer.macros().items():
        st.markdown(f"- `{macro.replace('RUN', filters.run_id)}`: {what}")
    st.caption("Definitions: docs/metrics.md and docs/semconv.md.")


def run(filters: Filters, sql: str) -> None:
    try:
        st.session_state[RESULT] = (sql, explorer.run_sql(filters, sql))
    except QueryError as error:
        st.session_state[RESULT] = (sql, error)


def show(filters: Filters) -> None:
    sql, result = st.session_state[RESULT]
    if isinstance(result, QueryError):
        page_frame.show_error(result)
        return
    limits = explorer.sandbox(filters.store, filters.run_id)
    st.caption(
        f"{charts.count(len(result.frame))} rows in {charts.seconds(result.seconds)}"
        + (f", cut at the row limit ({charts.count(limits.row_limit)})" if result.truncated else "")
    )
    st.dataframe(result.frame, hide_index=True, width="stretch")


filters = page_frame.page(
    "SQL", "Ask the views anything: the same SQL as `rollscope sql`, in a read-only sandbox."
)
limits = explorer.sandbox(filters.store, filters.run_id)
st.caption(
    f"Sandboxed: reads only this store's views, writes nothing, returns at most "
    f"{charts.count(limits.row_limit)} rows and stops a query after {limits.time_limit_s:g} s."
)
left, right = st.columns([2, 1])
with right:
    views(filters)
with left:
    with st.form("sql-form"):
        text = st.text_area("SQL", value=explorer.sql_example(), height=180, key="sql-text")
        submitted = st.form_submit_button("Run", type="primary")
    if submitted:
        run(filters, text)
    if RESULT in st.session_state:
        show(filters)
    else:
        st.caption("Edit the query and press Run (the first query reads every segment of the store once).")
