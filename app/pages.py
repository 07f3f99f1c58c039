"""The dashboard's pages, in sidebar order: the one list ``app/dashboard.py`` registers and the tests and
benchmarks visit. To add a page, write ``app/screens/<slug>.py`` and add a line here, a row to docs/dashboard.md's
"Pages" table and its name to README's "Pages:" list (tests/test_docs.py keeps the three equal).

The page scripts live in screens/, not pages/: Streamlit treats a pages/ folder beside the entry point as the
old multipage layout until the entry point has run once in that server, so a fresh server's first request to
/staleness ran the page without the sidebar (no filters: "no runs yet") and listed file names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    slug: str  # the script app/screens/<slug>.py, and the page's URL path /<slug>
    title: str
    icon: str

    @property
    def script(self) -> str:
        """The script's path from app/ (what ``st.Page`` and ``AppTest.switch_page`` take)."""
        return f"screens/{self.slug}.py"


PAGES = (  # the first is the default page, also served at /
    Page("overview", "Overview", ":material/dashboard:"),
    Page("compute", "Compute", ":material/memory:"),
    Page("funnel", "Funnel", ":material/filter_alt:"),
    Page("prefill_decode", "Prefill / decode", ":material/balance:"),
    Page("spec_decode", "Speculative decoding", ":material/bolt:"),
    Page("staleness", "Staleness & throughput", ":material/schedule:"),
    Page("learning", "Learning", ":material/trending_up:"),
    Page("health", "Health", ":material/monitor_heart:"),
    Page("rollouts", "Rollouts", ":material/timeline:"),
    Page("advisor", "Advisor", ":material/tips_and_updates:"),
    Page("compare", "Compare runs", ":material/compare_arrows:"),
    Page("sql", "SQL", ":material/terminal:"),
)
TITLES = {page.slug: page.title for page in PAGES}
