"""The sidebar every page shares: the store, its runs and the filters (run, environment, steps, live refresh).

Its choices go to session state as ``Filters`` for the page frame (``app.page_frame``) to hand to the page; a
link (``link``) sets them from the address when a page opens. Opening a run the first time derives it, under a
progress bar (``open_run``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlencode

import streamlit as st

from rollscope import formats
from rollscope.app.calls import call
from rollscope.app.filters import FILTERS, Filters
from rollscope.app.readers import live_store
from rollscope.errors import UnknownRunError
from rollscope.queries import analyses
from rollscope.store import layout

SAMPLE_STORE = Path(__file__).resolve().parent.parent / "sample_data"
LIVE_CHOICES_S = (2, 5, 10, 30)


def store_path() -> Path:
    """The store ``rollscope dashboard`` started the app on: its ``--store``, passed on after ``streamlit run
    app/dashboard.py --`` and read here by the command line's own parser and rule (``--store``, else
    ``$ROLLSCOPE_STORE``: ``commands.dashboard.chosen_store``), else the shipped sample_data/. Tests set it in
    session state."""
    if "store" in st.session_state:
        return Path(st.session_state["store"])
    from rollscope.app.cli import build_parser
    from rollscope.app.commands.dashboard import chosen_store

    args, _ = build_parser().parse_known_args(["dashboard", *sys.argv[1:]])
    return chosen_store(args) or SAMPLE_STORE


def sidebar() -> None:
    """Draw the filters and keep them in session state for the page (None when there is nothing to show)."""
    path = store_path()
    st.sidebar.caption(f"Store `{path}`")
    runs = layout.run_ids(path) if path.is_dir() else []
    st.session_state[FILTERS] = _filters(path, runs) if runs else None


def _filters(path: Path, runs: list[str]) -> Filters | None:
    requested = st.query_params.get("run")
    if requested is not None and requested not in runs:
        st.session_state[FILTERS] = None
        raise UnknownRunError(
            "Unknown run", f"no run {requested!r} in this store; it holds {', '.join(runs)}"
        )
    if requested is not None and st.session_state.get("run") not in runs:
        st.session_state["run"] = requested
    if st.session_state.get("run") not in runs:
        st.session_state["run"] = runs[-1]
    run = st.sidebar.selectbox("Run", runs, key="run")
    st.query_params["run"] = run
    store = str(path)
    open_run(store, run)
    bounds = call(store, analyses.steps, run)
    environments = [None, *call(store, analyses.environments, run)]
    _linked_environment(run, environments)
    environment = st.sidebar.selectbox(
        "Environment",
        environments,
        format_func=lambda e: "all environments" if e is None else e,
        key=f"environment:{run}",
    )
    return Filters(store, run, tuple(runs), _step_range(run, bounds), environment, _live_choice())


def link(page: str, run_id: str, steps: tuple[int, int] | None = None, environment: str | None = None) -> str:
    """A page's address with the sidebar's filters set: ``/rollouts?run=exp-7&steps=40-52&environment=math``
    (what a fired detector links to: the rollouts of the steps it fired at)."""
    params = {"run": run_id}
    if steps is not None:
        params["steps"] = f"{steps[0]}-{steps[1]}"
    if environment is not None:
        params["environment"] = environment
    return f"/{page}?{urlencode(params)}"


def _linked_environment(run: str, environments: list) -> None:
    """A link's ``environment=`` chooses the sidebar's environment when the page opens (the user's choice wins
    after that)."""
    key, wanted = f"environment:{run}", st.query_params.get("environment")
    if wanted in environments and key not in st.session_state:
        st.session_state[key] = wanted


def _linked_steps(key: str, bounds: tuple[int, int]) -> None:
    """A link's ``steps=A-B`` sets the sidebar's step range when the page opens (clipped to the run's)."""
    lo, sep, hi = (st.query_params.get("steps") or "").partition("-")
    if key in st.session_state or not sep or not (lo.isdigit() and hi.isdigit()):
        return
    chosen = (max(bounds[0], int(lo)), min(bounds[1], int(hi)))
    if chosen[0] <= chosen[1]:
        st.session_state[key] = chosen


def open_run(store: str, run_id: str) -> None:
    """Open ``run_id`` for this dashboard, under a spinner that says what takes the time: a run's first open
    brings its derived tables up to date with its segments, which for a long run never derived (a store
    written by another tool, or copied) means deriving them: minutes for tens of millions of spans. Then a
    progress element says what is being derived, how far it is and about how long is left."""
    from rollscope.queries import derive

    live = live_store(store)
    if live.is_open(run_id):
        return
    shown = st.empty()

    def show(run: str, fraction: float, what: str, left: float | None) -> None:
        eta = "" if left is None else f", about {formats.seconds(left)} left"
        shown.progress(min(1.0, fraction), text=f"Deriving run {run}: {what} ({fraction:.0%}{eta})")

    with (
        st.spinner(
            f"Opening run {run_id}: bringing its derived tables up to date with its segments (a long run's "
            "first open derives them: minutes for tens of millions of spans)…",
            show_time=True,
        ),
        derive.progress(show),
    ):
        live.reader(run_id)
    shown.empty()


def _step_range(run: str, bounds: tuple[int, int] | None) -> tuple[int, int] | None:
    if bounds is None or bounds[0] == bounds[1]:
        return None
    key = f"steps:{run}:{bounds}"
    _linked_steps(key, bounds)
    initial = {} if key in st.session_state else {"value": bounds}  # a link's range, or the user's since
    chosen = st.sidebar.slider("Train steps", bounds[0], bounds[1], key=key, **initial)
    return None if tuple(chosen) == tuple(bounds) else tuple(chosen)


def _live_choice() -> int | None:
    on = st.sidebar.toggle(
        "Live refresh", value=True, key="live", help="Re-read new segments while the run writes"
    )
    every = st.sidebar.selectbox("Every (seconds)", LIVE_CHOICES_S, key="live_s", disabled=not on)
    return every if on else None
