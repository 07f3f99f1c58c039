"""`rollscope watch`: alerts that reach a person, posted to a real local HTTP server (docs/report.md, "watch")."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rollscope.app.alerts import Verdict, Watch
from rollscope.app.notify import Webhook
from rollscope.store import alerts as store_alerts
from tests.conftest import ROOT, free_port, rollscope
from tests.simulated_runs import simulated_preset
from tests.test_detectors import check_lines


class Receiver:
    """A webhook: a real HTTP server on the loopback, recording every POST and answering from ``answers`` (one
    status per request, then 200)."""

    def __init__(self, port: int | None = None, answers=(), delay_s: float = 0.0):
        self.port = port or free_port()
        self.posts: list[dict] = []
        self.headers: list[dict] = []
        self.answers = list(answers)
        self.delay_s = delay_s
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(receiver.delay_s)
                status = receiver.answers.pop(0) if receiver.answers else 200
                if status == 200:
                    receiver.posts.append(json.loads(body))
                    receiver.headers.append(dict(self.headers))
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/T000/B000/secret"

    def states(self) -> list[tuple[str, str]]:
        return [(p["rollscope"]["rule"], p["rollscope"]["state"]) for p in self.posts]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(**kwargs) -> Receiver:
        made.append(Receiver(**kwargs))
        return made[-1]

    yield make
    for r in made:
        r.close()


def copy_run(preset: str, tmp_path):
    """A preset's spans in a store of the test's own (a watch writes its alert state there)."""
    source, _ = simulated_preset(preset)
    store = tmp_path / "store"
    for dataset in ("spans", "collector_stats"):
        shutil.copytree(source / dataset, store / dataset)
    return store


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.long
def test_watch_posts_one_alert_per_failing_rule_and_none_again_after_a_restart(
    tmp_path, receiver, monkeypatch
):
    store, hook = copy_run("kl-acceleration", tmp_path), receiver()
    monkeypatch.setenv("ROLLSCOPE_NOTIFY_URL", hook.url)  # a Slack URL is a secret: not on the command line
    monkeypatch.setenv("ROLLSCOPE_NOTIFY_TOKEN", "tok-123")
    watch = ("watch", "--store", store, "--run", "kl-acceleration", "--once", "--now", "last-span")
    code, out, _ = rollscope(*watch)
    _, lines = check_lines(store, "kl-acceleration")
    failing = {rule for rule, line in lines.items() if line.startswith("FAIL")}
    assert code == 1 and "kl-acceleration" in failing
    assert {rule for rule, state in hook.states()} == failing and len(hook.posts) == len(failing)
    alert = next(p for p in hook.posts if p["rollscope"]["rule"] == "kl-acceleration")
    assert alert["text"].startswith(
        ":rotating_light: rollscope: *kl-acceleration* failing on run `kl-acceleration`"
    )
    fields = alert["rollscope"]
    assert (fields["state"], fields["previous"], fields["run_id"]) == ("FAIL", "PASS", "kl-acceleration")
    assert fields["message"] == lines["kl-acceleration"].split(": ", 1)[1]
    assert fields["step"] == 71 and fields["unit"] == "times" and fields["threshold"] == 2.0
    assert all(h["Authorization"] == "Bearer tok-123" for h in hook.headers)
    assert len({p["rollscope"]["id"] for p in hook.posts}) == len(hook.posts)
    assert f"FAIL kl-acceleration: {fields['message']}" in out
    code, out, _ = rollscope(*watch)  # a restart: the state in the store says these were sent
    assert (code, out) == (1, "") and len(hook.posts) == len(failing)
    state = store_alerts.load(store, "kl-acceleration")
    assert all(e["delivered"] for e in state["events"]) and len(state["events"]) == len(failing)


@pytest.mark.long
def test_an_alert_recorded_but_not_delivered_is_sent_by_the_next_watch(tmp_path, receiver, monkeypatch):
    store = copy_run("kl-acceleration", tmp_path)
    down = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    monkeypatch.setattr("rollscope.app.commands.watch.CLOSE_TIMEOUT_S", 0.5)
    code, _, err = rollscope(
        "watch", "--store", store, "--run", "kl-acceleration", "--once", "--notify", down
    )
    assert code == 1 and "alerts not delivered yet; the next watch sends them" in err
    recorded = store_alerts.load(store, "kl-acceleration")["events"]
    assert recorded and not any(e["delivered"] for e in recorded)
    hook = receiver()
    rollscope("watch", "--store", store, "--run", "kl-acceleration", "--once", "--notify", hook.url)
    assert sorted(p["rollscope"]["id"] for p in hook.posts) == sorted(e["id"] for e in recorded)


def test_the_webhook_retries_with_backoff_and_never_holds_up_the_caller(receiver):
    port = free_port()
    outcomes, waits = [], []
    hook = Webhook(
        f"http://127.0.0.1:{port}/hook",
        on_done=lambda *outcome: outcomes.append(outcome),
        sleep=lambda s: (waits.append(s), time.sleep(0.02)),
    )
    started = time.monotonic()
    hook.post("a", {"text": "first"})
    hook.post("b", {"text": "second"})
    assert time.monotonic() - started < 0.05  # queued: the checks go on
    wait_for(lambda: len(waits) >= 3)  # nothing listens: refused, retried with growing waits
    up = receiver(port=port, answers=[503, 429])  # then it answers, badly twice
    assert hook.close(timeout=10) == 0
    assert outcomes == [("a", True, None), ("b", True, None)]
    assert [p["text"] for p in up.posts] == ["first", "second"]  # in order, each once
    assert waits[:3] == [1.0, 2.0, 4.0] and 0.0 in waits  # doubling; the 429's Retry-After: 0


def test_a_receiver_refusing_an_alert_for_good_does_not_block_the_next(receiver):
    up, outcomes = receiver(answers=[400]), []
    hook = Webhook(up.url, on_done=lambda *outcome: outcomes.append(outcome), sleep=lambda s: None)
    hook.post("bad", {"text": "refused"})
    hook.post("good", {"text": "taken"})
    hook.close(timeout=10)
    assert outcomes == [("bad", False, "HTTP 400"), ("good", True, None)]
    assert [p["text"] for p in up.posts] == ["taken"]


def test_an_alert_is_slack_text_with_run_data_escaped_and_a_link_to_its_page(tmp_path):
    watch = Watch(tmp_path, "exp-7", dashboard="http://dash:8501/")
    (event,) = watch.observe(
        [Verdict("length-drift", False, "env <@here> & co: 12 → 40", 0.6, 0.5, "share", 9)]
    )
    payload = watch.payload(event)
    assert payload["text"] == (
        ":rotating_light: rollscope: *length-drift* failing on run `exp-7` at step 9: env &lt;@here&gt; &amp; co: "
        "12 → 40 <http://dash:8501/learning?run=exp-7|open in rollscope>"
    )
    assert payload["rollscope"]["message"] == "env <@here> & co: 12 → 40"  # JSON carries it as it is
    assert payload["rollscope"]["link"] == "http://dash:8501/learning?run=exp-7"
    assert watch.observe([Verdict("length-drift", False, "still")]) == []  # no change, no alert
    (back,) = watch.observe([Verdict("length-drift", True, "fine")])
    assert (back["state"], back["previous"]) == ("PASS", "FAIL")
    assert watch.link({**back, "rule": "stall"}) == "http://dash:8501/health?run=exp-7"


@pytest.mark.long
def test_a_second_watch_of_a_run_is_refused(tmp_path):
    store = copy_run("healthy", tmp_path)
    with store_alerts.watching(store, "healthy"):
        code, _, err = rollscope("watch", "--store", store, "--run", "healthy", "--once")
    assert code == 1 and "Run already watched: another `rollscope watch` holds" in err


@pytest.mark.long
def test_a_bad_webhook_is_a_one_line_error_and_no_token_option_exists(tmp_path):
    store = copy_run("healthy", tmp_path)
    code, _, err = rollscope("watch", "--store", store, "--run", "healthy", "--once", "--notify", "ftp://x/y")
    assert code == 1 and err == "rollscope: Bad webhook: --notify: expected an http:// or https:// URL\n"
    from rollscope.app.cli import build_parser

    usage = build_parser()._subparsers._group_actions[0].choices["watch"].format_help()
    assert "--token" not in usage and "ROLLSCOPE_NOTIFY_TOKEN" in usage


def _default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Children that Ctrl-C (SIGINT) stops as a user's terminal would, even when pytest itself runs as a background
# job: a shell starts those with SIGINT ignored, children inherit that, and Python then installs no handler, so
# the watch never saw the test's SIGINT (a 60 s timeout, seen when CI was started with `( ... &)`).
CTRL_C = {"preexec_fn": _default_ctrl_c}


@pytest.mark.slow  # 75 s of wall time: the run is paced so that the watch sees its collapse while it lasts
def test_a_live_run_whose_entropy_collapses_sends_one_alert_and_one_recovery(tmp_path, receiver):
    """The issue's "done when": a paced simulated run, watched live (and the watch restarted after the alert:
    nothing is sent twice), sends exactly one FAIL and one PASS. The collapse lasts 12 steps of 2.5 s: a watch
    judges the latest step at each round, and one deriving the run on a busy machine (a full `make test-all`)
    missed a collapse of 12 steps of 1.5 s (simulated time: 'now' is the run's newest span)."""
    store, hook = tmp_path / "store", receiver()
    knobs = tmp_path / "knobs.json"
    collapse = {"at": 0.3, "until": 0.7, "factor": 0.06}
    knobs.write_text(
        json.dumps({"steps": 30, "skill_gain": 1.5, "spec_decoding": False, "entropy_collapse": collapse})
    )
    env = {**os.environ, "ROLLSCOPE_NOTIFY_URL": hook.url}
    cli = [sys.executable, "-m", "rollscope.app.cli"]
    simulate = [*cli, "simulate", "--store", str(store), "--run-id", "live", "--preset", "entropy-collapse"]
    simulate += ["--config", str(knobs), "--pace", "2.5", "--workers", "2", "--quiet"]
    watch = [*cli, "watch", "--store", str(store), "--run", "live", "--interval", "0.5", "--now", "last-span"]
    # This test is about the entropy alert; the stall rule is tested in test_check. Here it would rightly fire:
    # this run's trainer and judges idle up to 565 and 555 simulated seconds between spans (waiting for data),
    # and pacing squeezes ~244 simulated seconds into each 2.5 s step, so the store's publication lag (a
    # segment every 2 s, exports every 0.5 s) reads as ~250 s more silence: past the 600 s limit on a busy machine.
    watch += ["--threshold", "stall-silence=86400", "--threshold", "stall-rollout-age=86400"]
    watching = {"cwd": ROOT, "env": env, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **CTRL_C}
    watcher = subprocess.Popen(watch, **watching)
    run = subprocess.Popen(simulate, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **CTRL_C)
    try:
        wait_for(lambda: hook.posts, timeout=180)  # the collapse
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=60) == 0
        watcher = subprocess.Popen(watch, **watching)  # the same watch, restarted
        assert run.wait(timeout=180) == 0, run.stderr.read()
        wait_for(lambda: len(hook.posts) >= 2, timeout=120)  # the recovery
        time.sleep(3)  # more rounds over the finished run: nothing more to say
    finally:
        for process in (watcher, run):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=60)
    assert hook.states() == [("entropy-collapse", "FAIL"), ("entropy-collapse", "PASS")]
    fail, recovery = (p["rollscope"] for p in hook.posts)
    assert fail["step"] < recovery["step"]
    assert fail["message"].startswith("entropy ") and "collapse at 30.0 % or less" in recovery["message"]


# --- the state in the store, and where a person sees it -------------------------------------------------------


@pytest.mark.long
def test_an_unreadable_alert_state_is_refused_not_overwritten(tmp_path):
    store = copy_run("healthy", tmp_path)
    path = store_alerts.state_path(store, "healthy")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    code, _, err = rollscope("watch", "--store", store, "--run", "healthy", "--once")
    assert code == 1 and err.startswith("rollscope: Unreadable alert state: ")
    assert path.read_text() == "{not json"  # it holds what was sent: kept for a person to look at


@pytest.mark.long
def test_rm_deletes_a_runs_alert_state_with_the_run(tmp_path):
    store = copy_run("healthy", tmp_path)
    rollscope("watch", "--store", store, "--run", "healthy", "--once", "--now", "last-span")
    assert store_alerts.state_path(store, "healthy").exists()
    assert rollscope("rm", "--store", store, "--run", "healthy")[0] == 0
    assert not store_alerts.run_dir(store, "healthy").exists()


@pytest.mark.long
def test_the_health_page_shows_the_alerts_a_watch_recorded(tmp_path):
    from tests.test_dashboard import assert_clean, figure, open_page

    store = copy_run("kl-acceleration", tmp_path)
    at = open_page(store, "health", run="kl-acceleration")
    assert_clean(at)
    assert any("No alert recorded for this run" in c.value for c in at.caption)
    rollscope("watch", "--store", store, "--run", "kl-acceleration", "--once", "--now", "last-span")
    recorded = store_alerts.load(store, "kl-acceleration")["events"]
    at = open_page(store, "health", run="kl-acceleration")
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["rule"])[::-1] == [e["rule"] for e in recorded]
    assert set(table["delivered"]) == {"no webhook"}  # a watch without a webhook: recorded, never to be sent
    fails = {t["name"]: t for t in figure(at, "health-alerts")["data"]}["FAIL"]
    assert sorted(fails["y"]) == sorted(e["rule"] for e in recorded)
    assert figure(at, "health-alerts")["layout"]["xaxis"]["title"]["text"] == "time (UTC)"


@pytest.mark.long
def test_the_learning_page_shades_where_a_detector_fired_and_links_to_those_rollouts(tmp_path):
    from tests.test_dashboard import assert_clean, figure, open_page

    store = copy_run("entropy-collapse", tmp_path)
    at = open_page(store, "learning", run="entropy-collapse")
    assert_clean(at)
    table = at.dataframe[0].value.set_index("rule")
    row = table.loc["entropy-collapse"]
    first, last = (int(x) for x in row["latest stretch"].removeprefix("steps ").split("–"))
    assert row["now"] == "passing" and row["first fired at step"] == str(first)
    assert row["example rollouts"] == f"/rollouts?run=entropy-collapse&steps={first}-{last}"
    assert (table.drop(index="entropy-collapse")["example rollouts"].isna()).all()
    assert at.dataframe[0].proto.placeholder == "—"  # shown for those, as for the rules' other empty cells
    entropy = figure(at, "entropy")
    shaded = [s for s in entropy["layout"]["shapes"] if s["type"] == "rect"]
    assert [(s["x0"], s["x1"]) for s in shaded] == [(first - 0.5, last + 0.5)]
    assert entropy["layout"]["yaxis"]["title"]["text"] == "entropy (nats per token)"
    assert not figure(at, "kl")["layout"].get("shapes")  # kl-acceleration never fired: nothing shaded
