"""The dashboard's entry point (``rollscope dashboard`` runs ``streamlit run`` on this file).

It registers the pages, draws the shared filters in the sidebar, then runs the chosen page. Everything a page
shows comes from ``queries`` through ``app.data``.
"""

import streamlit as st

from rollscope.app import data
from rollscope.errors import RollscopeError

st.set_page_config(page_title="rollscope", page_icon=":material/monitoring:", layout="wide")

PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("pages/compute.py", title="Compute", icon=":material/memory:"),
    st.Page("pages/funnel.py", title="Funnel", icon=":material/filter_alt:"),
    st.Page("pages/prefill_decode.py", title="Prefill / decode", icon=":material/balance:"),
    st.Page("pages/spec_decode.py", title="Speculative decoding", icon=":material/bolt:"),
    st.Page("pages/staleness.py", title="Staleness & throughput", icon=":material/schedule:"),
    st.Page("pages/rollouts.py", title="Rollouts", icon=":material/timeline:"),
    st.Page("pages/compare.py", title="Compare runs", icon=":material/compare_arrows:"),
    st.Page("pages/sql.py", title="SQL", icon=":material/terminal:"),
]

page = st.navigation(PAGES)
try:
    data.sidebar()
except RollscopeError as error:
    st.title(page.title)
    data.show_error(error)
    st.stop()
page.run()
