"""The dashboard's entry point (``rollscope dashboard`` runs ``streamlit run`` on this file).

It registers the pages, draws the shared filters in the sidebar, then runs the chosen page. Everything a page
shows comes from ``queries`` through ``app.calls`` (the sidebar is ``app.sidebar``, the frame every page
is drawn in ``app.page_frame``).
"""

import streamlit as st

from rollscope.app import page_frame, pages, sidebar
from rollscope.errors import RollscopeError

st.set_page_config(page_title="rollscope", page_icon=":material/monitoring:", layout="wide")

# The list is app/pages.py. The first page is served at /; its slug (/overview, what a link to it by name or an
# old bookmark says) opens it there too, rather than Streamlit's "Page not found" dialog over it. Streamlit wants
# every page's own path unique, so the default page's is one nobody links to.
HOME, *OTHERS = pages.PAGES
PAGES = [
    st.Page(HOME.script, title=HOME.title, icon=HOME.icon, default=True, url_path=f"{HOME.slug}-home"),
    *(st.Page(p.script, title=p.title, icon=p.icon) for p in OTHERS),
]


def _home() -> None:
    st.switch_page(PAGES[0], query_params=st.query_params.to_dict())


page = st.navigation([*PAGES, st.Page(_home, title=HOME.title, url_path=HOME.slug, visibility="hidden")])
try:
    sidebar.sidebar()
except RollscopeError as error:
    st.title(page.title)
    page_frame.show_error(error)
    st.stop()
page.run()
