"""The real dashboard in a real browser: `rollscope dashboard` serves it, headless Chromium visits every page,
and while a job writes into the store the Overview's rollout count grows without a reload.

Needs Debian's chromium (``apt-get install chromium``) and the ``playwright`` package; skipped without them.
Screenshots land in tests/artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.fixtures.seeded_runs import RunWriter
from rollscope.app import pages as app_pages
from tests.conftest import free_port

pytestmark = [pytest.mark.browser, pytest.mark.long]  # a real Chromium per test: `make test-all`

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# URL path -> title, from the one page list (the default page is at /)
PAGES = {("" if i == 0 else p.slug): p.title for i, p in enumerate(app_pages.PAGES)}
# Points each Plotly chart on the page drew (its traces' x, y or values), as a user sees them: none is blank. Read
# from the traces as plotly.js drew them (_fullData): a line sent as a typed array is {dtype, bdata} in the data
# it was given.
DRAWN = """Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')).map(
    el => (el._fullData || []).reduce((n, t) => n + Math.max((t.x || []).length, (t.y || []).length,
    (t.values || []).length), 0))"""
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
RUN = "exp-7"

playwright = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    # CI installs Chromium (.ci/run): there, a missing browser is a failure, not a skip.
    if os.environ.get("CI"):
        raise RuntimeError("CI must install chromium (apt-get install chromium); the browser test cannot run")
    pytest.skip("no chromium at /usr/bin/chromium (apt-get install chromium)", allow_module_level=True)


def wait_healthy(url: str, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the dashboard exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"the dashboard did not answer at {url}")


@pytest.fixture(scope="module")
def writer(tmp_path_factory):
    """A run in progress: two steps written, more to come during the live test."""
    store = tmp_path_factory.mktemp("browser") / "store"
    writer = RunWriter(store, RUN, seed=7)
    for _ in range(2):
        writer.write_step()
    writer.flush()
    RunWriter(store, "exp-8", seed=8, spec=False).write_step()
    yield writer
    writer.shutdown()


@contextmanager
def serving(*store: str, log_name: str = "dashboard.log"):
    """`rollscope dashboard [--store DIR] --port P`, as a user starts it; stopped by its pid afterwards."""
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115 (closed below, after the server)
    server = subprocess.Popen(
        [sys.executable, "-m", "rollscope.app.cli", "dashboard", *store, "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def dashboard(writer):
    with serving("--store", str(writer.rollout.settings.store)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def settle(page, title: str) -> None:
    """The page's title is drawn and its live fragment has finished (its last line is the 'Live:' caption)."""
    page.get_by_role("heading", name=title, exact=True).wait_for(timeout=30_000)
    if title != "SQL":
        page.get_by_text("Live:").first.wait_for(timeout=30_000)
    page.wait_for_timeout(300)


def full_screenshot(page, path: Path) -> None:
    """Streamlit scrolls inside its main block, so grow the viewport to the page's height first."""
    height = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(height + 40, 8000)})
    page.wait_for_timeout(400)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_every_page_renders_without_an_error(dashboard, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    for path, title in PAGES.items():
        page.goto(f"{dashboard}/{path}?run={RUN}")
        settle(page, title)
        assert page.locator(ERRORS).count() == 0, f"{title}: {page.locator(ERRORS).first.inner_text()}"
        # Charts draw after the fragment's first run; give a loaded machine time. The SQL page has none, and the
        # Rollouts page opens its first rollout as a conversation (text; its waterfall is one view away).
        if title not in ("SQL", "Rollouts"):
            page.locator('[data-testid="stPlotlyChart"]').first.wait_for(timeout=30_000)
            page.wait_for_function(f"() => {DRAWN}.every(n => n > 0)", timeout=30_000)  # plotted, not blank
            points = page.evaluate(DRAWN)
            assert points and all(n > 0 for n in points), (title, points)  # each chart drew data
        full_screenshot(page, ARTIFACTS / f"{path or 'overview'}.png")
    page.close()


def test_a_page_opened_by_its_name_shows_it_and_no_page_not_found_dialog(dashboard, browser):
    """/overview (the default page's own name, which links and bookmarks use) opens the Overview, keeping the
    run; every page's name opens that page."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{dashboard}/overview?run={RUN}")
    settle(page, "Overview")
    assert page.get_by_text("Page not found").count() == 0
    assert f"run={RUN}" in page.url
    page.close()


def test_the_overview_headline_figures_fit_a_1500_pixel_window(browser, tmp_path):
    """A large run's headline figures are not cut off ("16,544.9 devic…") at a common laptop width: here a
    rollout worker holding a million devices for a minute, 16,666.7 device-hours."""
    from rollscope.collectors import attach

    now = time.time_ns()
    rl = attach(store=tmp_path / "big", run_id="big", devices=1_000_000, set_global=False)
    with rl.rollout("r1", task_id="t", group_id="g", start_time=now - 120 * 10**9, end_time=now) as rollout:
        with rl.turn(
            0, input_tokens=1_000, output_tokens=100, start_time=now - 120 * 10**9, end_time=now - 60 * 10**9
        ):
            pass
        rollout.set(reward=1.0)
    rl.shutdown()
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    with serving("--store", str(tmp_path / "big"), log_name="big.log") as url:
        page.goto(f"{url}/?run=big")
        settle(page, "Overview")
        assert page.get_by_text("16,666.7").count() == 1
        cut = page.evaluate(
            """() => Array.from(document.querySelectorAll('[data-testid="stMetricValue"] div'))
                   .filter(el => el.scrollWidth > el.clientWidth + 1).map(el => el.innerText)"""
        )
    assert cut == []
    page.close()


# Each Plotly chart's title and axis titles as plotly.js laid them out.
AXES = """Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')).map(
    el => [el._fullLayout.title.text, el._fullLayout.xaxis.title.text, el._fullLayout.yaxis.title.text])"""


@pytest.fixture(scope="module")
def simulated_dashboard():
    """The dashboard on a simulated run of the sample preset: re-rendered, evicted and moved turns, group members
    prefilling their task prompt again, compacted contexts."""
    from tests.simulated_runs import simulated

    store, _ = simulated("sample-preset")
    with serving("--store", str(store), log_name="simulated-dashboard.log") as url:
        yield url


def test_the_prefill_page_draws_the_split_by_remedy_with_labelled_axes(simulated_dashboard, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{simulated_dashboard}/prefill_decode?run=sample-preset")
    settle(page, "Prefill / decode")
    page.get_by_text("Repeated prefill, by remedy").wait_for(timeout=30_000)
    page.wait_for_function(f"() => {DRAWN}.length >= 6 && {DRAWN}.every(n => n > 0)", timeout=30_000)
    assert page.locator(ERRORS).count() == 0
    axes = {
        re.sub("<[^>]+>", "", title): (x, y) for title, x, y in page.evaluate(AXES)
    }  # Streamlit bolds titles
    assert axes["Prompt tokens per step, by what prefilled them"] == ("train step", "prompt tokens")
    assert axes["Prompt tokens per turn, by what prefilled them"] == ("turn index", "prompt tokens")
    assert all(x and y for x, y in axes.values()), axes  # every chart on the page says what its axes are
    for remedy in ("Exact continuity", "The group shares its task prompt", "Compaction off"):
        page.get_by_text(remedy).first.wait_for(timeout=10_000)
    full_screenshot(page, ARTIFACTS / "prefill_decode-split.png")
    page.close()


def dispatched(page) -> int:
    metric = page.locator('[data-testid="stMetric"]', has_text="Rollouts dispatched")
    return int(metric.locator('[data-testid="stMetricValue"]').inner_text().replace(",", ""))


def test_overview_counts_new_rollouts_without_a_reload(dashboard, browser, writer):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{dashboard}/?run={RUN}")
    settle(page, "Overview")
    before = dispatched(page)
    assert before == writer.rollouts
    page.evaluate("window.__rollscopeSameDocument = true")  # gone if the page reloads
    writer.write_step()  # the job goes on; its exporter publishes a segment within ~2 s
    writer.flush()
    deadline = time.monotonic() + 15  # ~2 s to publish + the 2 s interval, with room for a loaded CI machine
    while dispatched(page) == before and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert dispatched(page) == writer.rollouts > before
    assert page.evaluate("window.__rollscopeSameDocument === true")
    page.close()


def fresh_dashboard(store: Path, log_name: str, *, via_env: bool = False):
    """A new `rollscope dashboard` process that has served nothing yet (the store given as --store, or as
    $ROLLSCOPE_STORE)."""
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115 (closed by stop())
    store_args = [] if via_env else ["--store", str(store)]
    server = subprocess.Popen(
        [sys.executable, "-m", "rollscope.app.cli", "dashboard", *store_args, "--port", str(port)],
        env={**os.environ, "ROLLSCOPE_STORE": str(store) if via_env else ""},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def stop() -> None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()

    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
    except Exception:
        stop()
        raise
    return url, stop


# Each page as the very first request to a new server, with and without ?run=: the two examples in
# the default run, every other page and URL form in the slow one (a new server per URL takes ~8 s).
FIRST_REQUESTS = [(path, with_run) for path in PAGES for with_run in (True, False)]
FIRST_REQUESTS_DEFAULT = [("staleness", False), ("funnel", True), ("sql", False)]


def open_first(url: str, path: str, with_run: bool, browser) -> None:
    title = PAGES[path]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{url}/{path}" + (f"?run={RUN}" if with_run else ""))
        settle(page, title)
        assert page.locator(ERRORS).count() == 0, f"{title}: {page.locator(ERRORS).first.inner_text()}"
        assert page.get_by_text("holds no runs yet").count() == 0, title
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Overview" in nav and "Staleness & throughput" in nav and "spec_decode" not in nav, nav
        # ?run= picks the run; without it the newest run is shown, and the URL names it
        page.wait_for_function("() => window.location.search.includes('run=')", timeout=10_000)
        assert f"run={RUN}" in page.url or not with_run
    finally:
        page.close()


@pytest.mark.parametrize(("path", "with_run"), FIRST_REQUESTS_DEFAULT, ids=str)
def test_a_deep_link_works_as_the_first_request_to_a_new_server(writer, browser, path, with_run):
    # the store comes from $ROLLSCOPE_STORE here: the run exp-7 is not in sample_data/, so it must be this one
    url, stop = fresh_dashboard(writer.rollout.settings.store, "deep-link.log", via_env=True)
    try:
        open_first(url, path, with_run, browser)
    finally:
        stop()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "with_run"), [r for r in FIRST_REQUESTS if r not in FIRST_REQUESTS_DEFAULT], ids=str
)
def test_every_deep_link_works_as_the_first_request_to_a_new_server(writer, browser, path, with_run):
    url, stop = fresh_dashboard(writer.rollout.settings.store, "deep-link.log")
    try:
        open_first(url, path, with_run, browser)
    finally:
        stop()


def test_no_pages_folder_beside_the_entry_point():
    """Streamlit's old multipage mode, which broke first requests to deep links, is keyed on this folder."""
    assert not (ROOT / "app" / "pages").exists()


@pytest.fixture(scope="module")
def agent_store(tmp_path_factory):
    """An agent run with transcripts, one of whose rollouts (hostile-0) holds markup and script in its texts."""
    from benchmarks.fixtures.agent_runs import write_agent_run

    store = tmp_path_factory.mktemp("browser-agent") / "store"
    write_agent_run(store, "agent", steps=1)
    return store


def test_a_transcript_holding_markup_and_script_is_shown_as_text(agent_store, browser):
    """An agent's tool output and answer may hold HTML, JavaScript and markdown: the viewer shows them as the
    characters they are, and nothing in them runs, loads or renders."""
    url, stop = fresh_dashboard(agent_store, "transcript.log")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{url}/rollouts?run=agent&rollout=hostile-0")
        settle(page, "Rollouts")
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text("not red in a terminal").first.wait_for(timeout=30_000)
        text = main.inner_text()  # what a reader sees: in the tool's output and in the final answer
        assert text.count('<img src=x onerror="window.__rollscope_pwned = 2">') == 2
        assert text.count("<script>window.__rollscope_pwned = 1</script>") == 2
        assert text.count("**not bold** [not a link](javascript:alert(1)) :red[not red]") == 2
        assert page.evaluate("window.__rollscope_pwned") is None  # neither the script nor the onerror ran
        assert main.locator('img[src="x"]').count() == 0 and main.locator("script").count() == 0
        assert main.locator("h1, h2, h3", has_text="not a heading").count() == 0
        assert main.locator("strong, b", has_text="not bold").count() == 0
        assert main.locator("a", has_text="not a link").count() == 0
        assert page.locator(ERRORS).count() == 0
        full_screenshot(page, ARTIFACTS / "transcript-hostile.png")
    finally:
        page.close()
        stop()
