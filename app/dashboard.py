"""The dashboard's entry point (``rollscope dashboard`` runs ``streamlit run`` on this file).

It registers the pages, draws the shared filters in the sidebar, then runs the chosen page. Everything a page
shows comes from ``queries`` through ``app.data``.
"""

import streamlit as st

from rollscope.app import data
from rollscope.errors import RollscopeError

st.set_page_config(page_title="rollscope", page_icon=":material/monitoring:", layout="wide")

# The page scripts live in screens/, not pages/: Streamlit treats a pages/ folder beside the entry point as
# the old multipage layout until the entry point has run once in that server, so a fresh server's first
# request to /staleness ran the page without the sidebar (no filters: "no runs yet") and listed file names.
PAGES = [
    st.Page("screens/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("screens/compute.py", title="Compute", icon=":material/memory:"),
    st.Page("screens/funnel.py", title="Funnel", icon=":material/filter_alt:"),
    st.Page("screens/prefill_decode.py", title="Prefill / decode", icon=":material/balance:"),
    st.Page("screens/spec_decode.py", title="Speculative decoding", icon=":material/bolt:"),
    st.Page("screens/staleness.py", title="Staleness & throughput", icon=":material/schedule:"),
    st.Page("screens/rollouts.py", title="Rollouts", icon=":material/timeline:"),
    st.Page("screens/compare.py", title="Compare runs", icon=":material/compare_arrows:"),
    st.Page("screens/sql.py", title="SQL", icon=":material/terminal:"),
]

page = st.navigation(PAGES)
try:
    data.sidebar()
except RollscopeError as error:
    st.title(page.title)
    data.show_error(error)
    st.stop()
page.run()
