"""What the pages read, and the frame every page shares (filters, live refresh, clear empty states).

Pages hold no SQL: they ask this module for frames and dicts computed by ``queries`` and draw them. One
``queries.Reader`` per run shown serves every browser session (``st.cache_resource``, one ``LiveStore`` per
store), reading the run's derived tables from the store; a live refresh catches the run's derived state up with
the segments published since the last one (on a thread of its own: pages never wait for it), and results are
cached per run and per ``Reader.version`` (``st.cache_data``; the reader says when what it reads changed), so a
refresh that found nothing new costs one directory listing. Pages pass the ``queries`` functions themselves
(``analysis(analyses.funnel, filters)``). Below that cache, the analyses of one run and version are computed
once for every page and call that reads them (``queries.analyses.Memo``): the Overview's checks and trends reuse
what its report computed, the Compare page the compute terms and funnel of both reports.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from rollscope import formats
from rollscope.app import memory
from rollscope.errors import RollscopeError, UnknownRunError
from rollscope.queries import analyses, trace
from rollscope.queries import checks as queries_checks
from rollscope.queries import report as queries_report
from rollscope.queries.catalog import VIEW_DOCS
from rollscope.store import layout

SAMPLE_STORE = Path(__file__).resolve().parent.parent / "sample_data"
LIVE_CHOICES_S = (2, 5, 10, 30)
MIN_REFRESH_S = 1.0  # sessions refreshing the same store more often than this share one refresh
FILTERS = "_rollscope_filters"
T = TypeVar("T")
memory.limit_arenas()  # before the threads that draw pages exist (app/memory.py)


@dataclass(frozen=True)
class Filters:
    """The sidebar's choices, the same for every page."""

    store: str
    run_id: str
    runs: tuple[str, ...]
    steps: tuple[int, int] | None  # None: every step, including those still to come
    environment: str | None  # None: every environment
    live_s: int | None  # None: live refresh off


class NothingToShow(Exception):  # noqa: N818 (not an error: a page with no data for this selection yet)
    """Raised by a page section when the selection has nothing for it; the page shows the message instead."""


class LiveStore:
    """One Reader per run shown, shared by every session; each reader's ``version`` changes with its data.

    Only the runs a page asks about are opened (a store of a hundred runs costs the one on screen; Compare
    opens the two compared), each reading its derived tables from the store. Results are cached per run
    version (``Reader.version``: new whenever the run's segments or derived state change), so a finished run
    stays cached while another run of the store writes. New data is taken in no more often than the figures of the previous change took to
    compute: on a store where recomputing takes longer than the live interval, the dashboard spends at most
    half its time computing and stays responsive.
    """

    def __init__(self, path: str):
        self.path = path
        self.checked_at = self.changed_at = time.time()
        self.busy_s = 0.0  # seconds spent computing figures since the last change
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()  # opening a run may derive it: not under the refresh's lock
        self._readers: dict[str, object] = {}
        self._memos: dict[str, tuple[tuple, analyses.Memo]] = {}
        self._memos_lock = threading.Lock()  # not the refresh's: a refresh must not hold up the figures
        self._refresher: threading.Thread | None = None  # the catch-up in progress, if any
        self._failed: Exception | None = None  # its error, for the next page to show

    def reader(self, run_id: str):
        """The run's Reader, opened (and its derived state caught up) on first use."""
        reader = self._readers.get(run_id)
        if reader is not None:
            return reader
        with self._open_lock:
            if run_id not in self._readers:
                from rollscope.queries.reader import Reader

                reader = Reader(self.path, run_id=run_id)
                reader.wait = False  # later refreshes read the last published state while another derives
                self._readers[run_id] = reader
            return self._readers[run_id]

    def refresh(self) -> None:
        """Take in the segments published since the last refresh, for the runs open, on a thread of its own
        (rate-limited as above, one at a time). A page never waits for a catch-up, which on a long live run
        takes seconds (its derived state is brought up to date): it draws what was read so far, and the live
        tick after the catch-up draws what it took in. The last catch-up's error is raised here, on a page's
        thread, so the page shows it, until a later catch-up succeeds."""
        with self._lock:
            failed, now = self._failed, time.time()
            due = now - self.checked_at >= MIN_REFRESH_S and now - self.changed_at >= self.busy_s
            if due and not self.refreshing:
                self.checked_at = now
                self._refresher = threading.Thread(
                    target=self._catch_up, args=(now,), name="rollscope-refresh", daemon=True
                )
                self._refresher.start()
        if failed is not None:
            raise failed

    @property
    def refreshing(self) -> bool:
        """Whether a catch-up started by ``refresh`` is still running."""
        return self._refresher is not None and self._refresher.is_alive()

    def _catch_up(self, started: float) -> None:
        try:
            for reader in list(self._readers.values()):
                before = reader.version
                reader.refresh()
                if reader.version != before:  # the reader says what changed; the app lists nothing itself
                    with self._lock:
                        self.changed_at, self.busy_s = started, 0.0
        except Exception as e:  # the pages show it (refresh)
            self._failed = e
        else:
            self._failed = None

    def is_open(self, run_id: str) -> bool:
        return run_id in self._readers

    def version(self, run_id: str) -> int:
        """The version of ``run_id``'s data this store's reader reads (``Reader.version``)."""
        return self.reader(run_id).version

    def memo(self, run_id: str, generation: str) -> analyses.Memo:
        """The analyses computed so far on ``run_id``'s current segments, kept until they change or the
        result cache is cleared (a new ``generation``)."""
        reader = self.reader(run_id)
        with self._memos_lock:
            key = (reader.version, generation)
            kept = self._memos.get(run_id)
            if kept is None or kept[0] != key:
                kept = self._memos[run_id] = (key, analyses.Memo(reader.cursor))
            return kept[1]

    def computed(self, seconds: float) -> None:
        with self._lock:
            self.busy_s += seconds

    def cursor(self, run_id: str):
        return self.reader(run_id).cursor()

    def segment_count(self) -> int:
        """Span segments read, over the runs open."""
        return sum(r.segment_count() for r in list(self._readers.values()))


@st.cache_resource(show_spinner="Loading the store…", max_entries=8)
def live_store(path: str) -> LiveStore:
    return LiveStore(path)


@st.cache_resource(show_spinner=False, max_entries=8)
def sandbox(path: str, _first_run: str | None = None):
    """The SQL explorer's locked-down connection for this store (one, shared; queries run one at a time).

    It derives no run itself: its derived views hold the runs readers have derived (the one on screen is, by
    ``run_sql``). It opens with the run on screen alone (``_first_run``, the first page's to ask) and binds the
    store's other runs at the first query, so the page on a store of many runs costs the run shown, and a query
    still reads every run."""
    from rollscope.queries.sandbox import Sandbox

    return Sandbox(path, derive=False, first_run=_first_run)


# --- the store and its filters ----------------------------------------------------------------------------


def store_path() -> Path:
    """``--store`` after ``streamlit run app/dashboard.py --``; tests set it in session state."""
    if "store" in st.session_state:
        return Path(st.session_state["store"])
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store")
    given, _ = parser.parse_known_args(sys.argv[1:])
    return Path(given.store) if given.store else SAMPLE_STORE


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


# --- page frame -------------------------------------------------------------------------------------------


def page(title: str, what: str) -> Filters:
    """The page's title and one-line purpose, then its filters; stops with a message when there are none."""
    st.title(title)
    st.caption(what)
    filters = st.session_state.get(FILTERS)
    if filters is None:
        _explain_no_runs(store_path())
        st.stop()
    return filters


def _explain_no_runs(path: Path) -> None:
    if not path.exists():
        st.error(f"No store at `{path}`: nothing has been written there yet.")
    elif not path.is_dir():
        st.error(f"`{path}` is a file, not a rollscope store directory.")
        return
    else:
        st.info(f"The store at `{path}` holds no runs yet.")
    st.caption(
        "Start a job with `attach(store=...)` or `rollscope simulate`; this page checks every few seconds."
    )
    _wait_for_runs(str(path))


@st.fragment(run_every=2)
def _wait_for_runs(path: str) -> None:
    if Path(path).is_dir() and layout.run_ids(path):
        st.rerun()


def live(body: Callable[[Filters], None], filters: Filters) -> None:
    """Run ``body`` in a fragment that re-reads new segments and redraws every ``live_s`` seconds."""

    @st.fragment(run_every=filters.live_s)
    def refreshed() -> None:
        store = live_store(filters.store)
        try:
            store.refresh()  # a catch-up's error shows here, as the page's own would
            body(filters)
        except NothingToShow as message:
            st.info(str(message))
        except RollscopeError as e:
            st.error(f"**{e.title}**: {e}")
            return
        finally:
            memory.release()  # what drawing the page freed goes back to the system (app/memory.py)
        if filters.live_s:
            st.caption(_live_line(store, filters.live_s))

    refreshed()


def _live_line(store: LiveStore, every_s: int) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(store.checked_at))
    line = f"Live: {store.segment_count():,} segments read, checked {stamp}, every {every_s} s."
    if store.refreshing and time.time() - store.checked_at >= 1.0:  # a catch-up, not a listing
        line += " Taking in new segments: the figures update when that is done."
    if store.busy_s > every_s:
        line += (
            f" Recomputing takes about {store.busy_s:.0f} s here, so new data is taken in at most that often."
        )
    return line


def show_error(error: RollscopeError) -> None:
    st.error(f"**{error.title}**: {error}")


# --- calling queries --------------------------------------------------------------------------------------

# Modules whose functions take an analyses.Memo in place of a connection (they share computed analyses).
MEMO_MODULES = frozenset(m.__name__ for m in (analyses, queries_report, queries_checks))


@st.cache_data(show_spinner=False)
def _generation(store: str) -> str:
    """A new token each time the result cache is cleared, so that the analyses kept under it go too."""
    return uuid.uuid4().hex


@st.cache_data(show_spinner=False, max_entries=2048)
def _cached(store: str, version: int, name: str, _function: Callable, args: tuple, options: tuple):
    """``_function``'s result, cached per store, run data version and arguments (``name``: its key)."""
    live, started = live_store(store), time.perf_counter()
    run_id = args[0]
    memoized = _function.__module__ in MEMO_MODULES

    def answer():
        con = live.memo(run_id, _generation(store)) if memoized else live.cursor(run_id)
        return _function(con, *args, **dict(options))

    result = live.reader(run_id).retrying(answer)  # again on a fresh listing if a compaction moved a file
    live.computed(time.perf_counter() - started)
    return result


def call(store: str, function: Callable, run_id: str, *args, **options):
    """``function(con, run_id, *args, **options)`` (a function of ``rollscope.queries``), cached until that
    run's data changes."""
    version = live_store(store).version(run_id)
    name = f"{function.__module__}.{function.__qualname__}"
    return _cached(store, version, name, function, (run_id, *args), tuple(sorted(options.items())))


def analysis(function: Callable, filters: Filters, run_id: str | None = None, **options):
    """``function(con, run, steps=..., environment=..., **options)`` for the page's run (or ``run_id``), step
    range and environment: every analysis a page shows takes both filters."""
    scope = {"steps": filters.steps, "environment": filters.environment}
    return call(filters.store, function, run_id or filters.run_id, **scope, **options)


def checks(filters: Filters) -> pd.DataFrame:
    """``queries.checks.run_checks`` as a table: failing rules first (✗), each value and threshold written
    the way its message states it (``48.0 %``, not ``0.475``). The checks read the whole run."""
    from rollscope import formats

    results = sorted(call(filters.store, queries_checks.run_checks, filters.run_id), key=lambda r: r.ok)
    return pd.DataFrame(
        {
            "": ["✓" if r.ok else "✗" for r in results],
            "check": [r.name for r in results],
            "value": [formats.check_value(r.value, r.unit) for r in results],
            "threshold": [formats.check_value(r.threshold, r.unit) for r in results],
            "message": [r.message for r in results],
        }
    )


SECTIONS = {
    "steps": "Steps",
    "funnel": "Funnel",
    "compute": "Compute",
    "prefill_decode": "Prefill : decode",
    "spec_decode": "Speculative decoding",
    "staleness": "Staleness",
    "trainer": "Trainer",
    "throughput": "Throughput",
}
# Report keys where more is better (+1) or worse (-1); Compare highlights the better run on these only.
BETTER = {
    "funnel.usable": 1,
    "funnel.rates.": 1,
    "compute.wasted_compute_share": -1,
    "compute.token_work.reprefilled": -1,
    "compute.token_work.generated_per_usable_token": -1,
    "prefill_decode.cache_hit_rate": 1,
    "prefill_decode.reprefill_waste_tokens": -1,
    "spec_decode.acceptance_rate": 1,
    "spec_decode.mean_accepted_length": 1,
    "spec_decode.expected_tokens_per_step": 1,
    "spec_decode.max_drift_points": -1,
    "spec_decode.drafter_logprob_turns": -1,
    "staleness.mean": -1,
    "staleness.within_bound_share": 1,
    "staleness.freshness_rate": 1,
    "staleness.beyond_bound": -1,
    "staleness.violations": -1,
    "staleness.used_beyond_bound": -1,
    "trainer.idle_fraction": -1,
    "throughput.rollout_tokens_per_s": 1,
    "throughput.tool_wait_share": -1,
    "throughput.dropped_spans": -1,
    "throughput.failed_spans": -1,
}


def figure_label(key: str) -> str:
    """A report key as Compare labels it: ``funnel.rates.completion`` → ``Funnel · completion rate``."""
    section, _, rest = key.partition(".")
    if not rest:
        return label(section).capitalize()
    parts = rest.split(".")
    if section == "funnel" and parts[0] == "rates":
        name = f"{label(parts[1]).replace('nonzero signal', 'nonzero-signal')} rate"
    elif section == "compute" and parts[0] in ("flops", "device_seconds", "flops_share") and len(parts) > 1:
        what = {"flops": "FLOPs", "device_seconds": "device time", "flops_share": "share of C_total FLOPs"}
        name = f"C_{parts[1]} {what[parts[0]]}"
    elif key == "compute.env_cpu_seconds":
        name = "C_env CPU time"
    else:
        name = " ".join(
            label(p) for p in parts if p not in ("token_work", "disaggregation") or len(parts) == 1
        )
    return f"{SECTIONS.get(section, label(section))} · {name}"


def report_value(key: str, value) -> str:
    """A report value formatted by what it is (a share, FLOPs, seconds, a count), as every page does."""
    from rollscope import formats

    if value is None or isinstance(value, bool | str):
        return "" if value is None else ("yes" if value is True else "no" if value is False else value)
    last = key.rsplit(".", 1)[-1]
    if _is_share(key):
        return formats.rate(value)
    if ".flops." in key:
        return formats.flops(value)
    if ".device_seconds." in key:
        return formats.device_seconds(value)
    if last == "env_cpu_seconds":
        return formats.device_seconds(value, "CPU")
    if last.endswith("_s") or last.endswith("_seconds"):
        return formats.seconds(value)
    if last == "max_drift_points":
        return formats.points(value)
    return formats.count(value) if float(value).is_integer() else formats.number(value)


AT_ONCE_THREADS = 4  # a page's independent figures computed together (DuckDB releases the GIL)


def at_once(calls: dict[str, Callable[[], T]]) -> Figures:
    """Each of ``calls`` (a page's ``analysis`` / ``call`` figures, independent of each other) started at once on
    a few threads of the page's session, so the page draws the first while the others compute. A page's
    figures are small queries over per-step tables (parse, bind and plan on the calling thread, then a short
    scan), which one after another leave a core idle; a chart's Python work overlaps them too. Figures two
    calls share are computed once (``analyses.Memo``). A figure's error is raised where it is read."""
    from concurrent.futures import ThreadPoolExecutor

    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

    context = get_script_run_ctx()

    def one(call: Callable[[], T]) -> T:
        add_script_run_ctx(ctx=context)  # the cache and spinner belong to the page's session
        return call()

    pool = ThreadPoolExecutor(
        max_workers=max(1, min(len(calls), AT_ONCE_THREADS)), thread_name_prefix="rollscope-page"
    )
    try:
        return Figures({name: pool.submit(one, call) for name, call in calls.items()})
    finally:
        pool.shutdown(wait=False)  # the threads end once the figures are computed


class Figures:
    """A page's figures being computed (``at_once``). ``figures[name]`` waits for that one; ``next(figures)``
    gives ``(name, result)`` of the next in the order asked, and iterating the rest, so a page can draw each
    section as soon as its own figures are ready, in its own order."""

    def __init__(self, futures: dict) -> None:
        self._futures = futures
        self._order = iter(futures)

    def __getitem__(self, name):
        return self._futures[name].result()

    def __iter__(self) -> Figures:
        return self

    def __next__(self) -> tuple:
        name = next(self._order)
        return name, self[name]


def compare(filters: Filters, other: str) -> pd.DataFrame:
    """The reports of the page's run and ``other`` side by side (``report_table``), both with the filters.

    The two reports are computed at once, one per thread: each is some thirty small queries that leave a core
    idle, so together they take little more than the larger one."""
    runs = (filters.run_id, other)
    reports = dict(
        at_once({run: partial(analysis, queries_report.report, filters, run_id=run) for run in runs})
    )
    return report_table(live_store(filters.store).cursor(filters.run_id), reports)


def report_table(con, reports: dict[str, dict]) -> pd.DataFrame:
    """Reports of two runs, one row per figure with a readable label, the change from the first to the
    second (absolute, in the figure's own format, and relative; ``queries.report.changes`` computes both)
    and which run is better where that is plain (``better``: the run's id, else empty). ``key`` keeps the
    report's dotted key."""
    from rollscope import formats

    flat = {run: _without_run_id(flatten(report)) for run, report in reports.items()}
    (run_a, first), (run_b, second) = flat.items()
    diff = queries_report.changes(con, first, second)
    keys = diff["key"].tolist()
    changes = [None if formats.missing(c) else c for c in diff["change"]]
    table = pd.DataFrame(
        {
            "figure": [figure_label(k) for k in keys],
            **{run: [report_value(k, f.get(k)) for k in keys] for run, f in flat.items()},
        }
    )
    table["change"] = [
        "" if c is None else _signed(report_value(k, c), c) if not _is_share(k) else formats.points(100 * c)
        for k, c in zip(keys, changes, strict=True)
    ]
    table["relative change"] = [
        formats.rate(r) if c is not None and not _is_share(k) else ""
        for k, c, r in zip(keys, changes, diff["relative_change"], strict=True)
    ]
    table["better"] = [_better(k, c, run_a, run_b) for k, c in zip(keys, changes, strict=True)]
    table["key"] = keys
    return table


def _without_run_id(flat: dict) -> dict:
    return {k: v for k, v in flat.items() if k != "run_id"}


def _is_share(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    return ".rates." in key or "flops_share" in key or last.endswith(("rate", "share", "fraction"))


def _signed(text: str, change) -> str:
    return text if change < 0 or text.startswith("-") else f"+{text}"


def _better(key: str, change, run_a: str, run_b: str) -> str:
    direction = next((d for prefix, d in BETTER.items() if key == prefix or key.startswith(prefix)), 0)
    if not direction or not change:
        return ""
    return run_b if change * direction > 0 else run_a


def label(name: str) -> str:
    return name.replace("_", " ")


def flatten(value, prefix: str = "") -> dict:
    """A nested report as ``{"funnel.rates.completion": 0.95, ...}``; lists become one readable cell."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        value = "; ".join(
            ", ".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else str(x) for x in value
        )
    return {prefix.rstrip("."): value}


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


def alert_events(filters: Filters) -> pd.DataFrame:
    """The alerts `rollscope watch` recorded for the page's run (``queries.alerts``): a small file, read anew on
    every draw, so a live page shows an alert as soon as the watch records it."""
    from rollscope.queries import alerts

    return alerts.events(filters.store, filters.run_id)


def rollouts(filters: Filters, **search) -> object:
    """``trace.search`` for the page's run, step range and environment."""
    return call(
        filters.store,
        trace.search,
        filters.run_id,
        environment=filters.environment,
        steps=filters.steps,
        limit=trace.SEARCH_LIMIT,
        **search,
    )


def rollout(filters: Filters, rollout_id: str) -> tuple[dict | None, object, object]:
    """One rollout's outcome and consumer, its spans for the waterfall and its group's attempts with rewards
    and advantages, computed at once, each read in the rollout's time window (``trace.window``, looked up once
    for the three)."""
    bounds = call(filters.store, trace.window, filters.run_id, rollout_id)
    found = dict(
        at_once(
            {
                "rollout": partial(call, filters.store, trace.rollout, filters.run_id, rollout_id, bounds),
                "spans": partial(call, filters.store, trace.spans, filters.run_id, rollout_id, bounds),
                "group": partial(call, filters.store, trace.group, filters.run_id, rollout_id, bounds),
            }
        )
    )
    return found["rollout"], found["spans"], found["group"]


def window(filters: Filters, rollout_id: str) -> dict:
    """Where in time the rollout's spans and messages can be (``trace.window``): what each of its lookups
    reads within, looked up once per rollout and run version."""
    return call(filters.store, trace.window, filters.run_id, rollout_id)


def examples(filters: Filters, selection, *, scoped: bool = True, **options):
    """``queries.examples.rollouts`` of ``selection`` for the page's run, in its step range and environment
    (``scoped``; else the whole run, as the checks read it)."""
    from rollscope.queries import examples as queries_examples

    scope = {"steps": filters.steps, "environment": filters.environment} if scoped else {}
    return call(filters.store, queries_examples.rollouts, filters.run_id, selection, **scope, **options)


def continuity(filters: Filters, rollout_id: str):
    """The rollout's turns with where prefix continuity broke and where compaction happened (``trace.continuity``),
    read in its time window (``trace.window``, cached with the rollout's other lookups)."""
    return call(filters.store, trace.continuity, filters.run_id, rollout_id, window(filters, rollout_id))


def sql_example() -> str:
    """The explorer's first query (``queries/sql/sandbox/example.sql``)."""
    from rollscope.queries import sqlfiles

    return sqlfiles.load("sandbox/example")


def run_sql(filters: Filters, sql: str):
    """The SQL explorer's query, in the sandbox (QueryError on refusal, failure or time limit), with the run on
    screen's derived state current."""
    live_store(filters.store).reader(filters.run_id).refresh()
    return sandbox(filters.store, filters.run_id).query(sql)
