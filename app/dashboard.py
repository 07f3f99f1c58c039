"""The dashboard's entry point (``rollscope dashboard`` runs ``streamlit run`` on this file).

It registers the pages, draws the shared filters in the sidebar, then runs the chosen page. Everything a page
shows comes from ``queries`` through ``app.data``.
"""

import streamlit as st

from rollscope.app import data, pages
from rollscope.errors import RollscopeError

st.set_page_config(page_title="rollscope", page_icon=":material/monitoring:", layout="wide")

PAGES = [  # the list is app/pages.py
    st.Page(p.script, title=p.title, icon=p.icon, default=i == 0) for i, p in enumerate(pages.PAGES)
]

page = st.navigation(PAGES)
try:
    data.sidebar()
except RollscopeError as error:
    st.title(page.title)
    data.show_error(error)
    st.stop()
page.run()
