"""`rollscope report`: the figures a user reads, as text and as the stable JSON object of docs/report.md."""

from __future__ import annotations

import json
import re

import pytest

from rollscope.queries import analyses, connect
from rollscope.queries.checks import run_checks
from rollscope.queries.report import headline as headline_of
from rollscope.queries.report import report
from rollscope.semconv import FUNNEL_STAGES as STAGES
from tests.conftest import ROOT, rollscope
from tests.test_analyses_simulated import simulated


@pytest.fixture(scope="module")
def sample():
    return simulated("samples")


def _flatten(value, prefix=""):
    """JSON object → dotted keys; lists (losses, reasons, environments) are leaves."""
    if not isinstance(value, dict):
        return {prefix: value}
    out = {}
    for key, item in value.items():
        out.update(_flatten(item, f"{prefix}.{key}" if prefix else key))
    return out


@pytest.mark.long
def test_json_report_holds_the_ground_truth(sample):
    store, truth = sample
    code, out, _ = rollscope("report", "--store", store, "--run", "samples", "--json")
    assert code == 0
    report = json.loads(out)
    run = truth["run"]
    assert {k: report["funnel"][k] for k in STAGES} == {
        k: v for k, v in run["funnel"].items() if k != "rates"
    }
    for rate in ("completion", "scoring", "nonzero_signal", "freshness"):
        assert report["funnel"]["rates"][rate] == pytest.approx(run["funnel"]["rates"][rate], rel=0.01)
    for term in ("rollout", "train", "teacher", "judge"):
        assert report["compute"]["flops"][term] == pytest.approx(run["compute"]["flops"][term], rel=0.01)
        assert report["compute"]["device_seconds"][term] == pytest.approx(
            run["compute"]["device_seconds"][term], rel=0.01
        )
    assert report["compute"]["env_cpu_seconds"] == pytest.approx(run["compute"]["env_cpu_seconds"], rel=0.01)
    # C_total is the accelerator terms' sum (never C_env, CPU time), and a term's share is its part of it
    accelerators = ("rollout", "train", "teacher", "judge")
    for measure in ("flops", "device_seconds"):
        total = sum(run["compute"][measure][t] for t in accelerators)
        assert report["compute"][measure]["total"] == pytest.approx(total, rel=0.01)
    flops_total = sum(run["compute"]["flops"][t] for t in accelerators)
    assert report["compute"]["flops_share"] == pytest.approx(
        {t: run["compute"]["flops"][t] / flops_total for t in accelerators}, rel=0.01
    )
    assert report["prefill_decode"]["ratio"] == pytest.approx(run["prefill_decode"]["ratio"], rel=0.01)
    assert report["prefill_decode"]["cache_hit_rate"] == pytest.approx(
        run["prefill_decode"]["cache_hit_rate"]
    )
    assert report["spec_decode"]["acceptance_rate"] == pytest.approx(
        run["spec_decode"]["acceptance_rate"], abs=0.005
    )
    assert report["spec_decode"]["mean_accepted_length"] == pytest.approx(
        run["spec_decode"]["mean_accepted_length"]
    )
    assert report["staleness"]["mean"] == pytest.approx(run["staleness"]["mean"])
    assert report["staleness"]["freshness_rate"] == pytest.approx(run["staleness"]["freshness_rate"])
    assert report["trainer"]["idle_fraction"] == pytest.approx(run["trainer"]["idle_fraction"], rel=0.01)


@pytest.mark.long
def test_every_json_key_is_documented_and_every_documented_key_exists(sample):
    store, _ = sample
    _, out, _ = rollscope("report", "--store", store, "--run", "samples", "--json")
    keys = set(_flatten(json.loads(out)))
    doc = (
        (ROOT / "docs" / "report.md").read_text().split("## `report --json` keys", 1)[1].split("\n## ", 1)[0]
    )
    documented = {
        key
        for cell in re.findall(r"^\| (`[^|]+`) \|", doc, flags=re.M)
        for key in re.findall(r"`([a-z_.0-9]+)`", cell)
    }
    assert keys == documented


@pytest.mark.long
def test_text_report_reads_like_the_funnel(sample):
    store, truth = sample
    code, out, _ = rollscope("report", "--store", store, "--run", "samples")
    assert code == 0
    usable = truth["run"]["funnel"]["usable"]
    assert re.search(rf"^  usable\s+{usable:,}\s", out, flags=re.M)
    for section in (
        "Usable-experience funnel",
        "Compute",
        "Prefill : decode",
        "Speculative decoding",
        "Staleness",
        "Trainer and throughput",
    ):
        assert f"\n{section}\n" in out
    # one number format: FLOPs with SI prefixes, shares as %, a C_total line, durations with units
    assert re.search(r"^  C_total\s+\d+\.\d\d [kMGTPE]?FLOP  [\d,.]+ device-[sh]$", out, flags=re.M), out
    assert re.search(r"^  C_env\s+[\d,.]+ CPU-[sh]", out, flags=re.M)
    assert "e+" not in out and not re.search(r"\d\.\d+%", out)  # no 1.33e+18, no 12.3% beside 12.3 %
    assert re.search(r"^  rollout duration p50 / p90 / p99\s+[\d.]+ (ms|s|min|h) / ", out, flags=re.M)


@pytest.mark.long
def test_unknown_run_is_one_clear_line(sample):
    store, _ = sample
    code, out, err = rollscope("report", "--store", store, "--run", "nope")
    assert (code, out) == (1, "")
    assert err.strip() == "rollscope: Unknown run: no run 'nope' in this store (`rollscope runs` lists them)"


@pytest.mark.long
def test_a_report_and_the_checks_on_one_shared_connection_run_each_analysis_once(sample):
    store, _ = sample
    con = connect(store)
    runs = []  # one entry per analysis actually run
    memo = analyses.Memo(lambda: runs.append(1) or con)
    figures = report(memo, "samples")
    plain = _flatten(report(con, "samples"))
    assert _flatten(figures) == {k: pytest.approx(v) if isinstance(v, float) else v for k, v in plain.items()}
    ran = len(runs)
    assert report(memo, "samples") == figures and len(runs) == ran  # kept, not run again
    assert [r.line() for r in run_checks(memo, "samples")] == [r.line() for r in run_checks(con, "samples")]
    # each analysis ran once, whoever asked first: as many runs as distinct analyses and parameters kept
    assert len(runs) == memo.kept()
    frame = analyses.funnel(memo, "samples", by="step")
    frame["usable"] = -1  # a caller changing its copy changes nobody else's
    assert (analyses.funnel(memo, "samples", by="step")["usable"] >= 0).all()


@pytest.mark.long
def test_the_overview_headline_is_the_report_less_what_it_does_not_show(sample):
    store, _ = sample
    con = connect(store)
    full = _flatten(report(con, "samples", steps=(3, 9)))
    runs = []
    headline = _flatten(headline_of(analyses.Memo(lambda: runs.append(1) or con), "samples", steps=(3, 9)))
    assert headline == {k: full[k] for k in headline}
    assert "prefill_decode.ratio" in headline and "trainer.idle_fraction" in headline
    assert not any(k.startswith(("throughput", "staleness", "funnel.losses")) for k in headline)
    # what it leaves out is not computed: the step range, environments, losses, disaggregation, staleness
    # and throughput analyses of the report did not run, nor its six health and goodput ones
    shown = analyses.Memo(lambda: con)
    headline_of(shown, "samples", steps=(3, 9))
    whole = analyses.Memo(lambda: con)
    report(whole, "samples", steps=(3, 9))
    left_out = {
        "step_range",
        "environments",
        "funnel_losses",
        "disaggregation",
        "staleness_summary",
        "throughput",
        "staleness_timing",
        "stale_bias",
        "learning",
        "task_solve_summary",
        "zero_signal",
        "mismatch",
        "in_flight",
        "liveness",
        "scoring_latency",
        "trainer_goodput",
        "rollout_goodput",
        "wasted_devices",
    }
    assert left_out <= whole.computed() and not left_out & shown.computed()
    assert shown.computed() <= whole.computed()


def _readme_attach_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Attach to a job") :]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def attach_example(tmp_path_factory):
    """README's attach example, run as a user would: a script in its own folder, then the commands."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("attach-example")
    (folder / "job.py").write_text(_readme_attach_example())
    subprocess.run([sys.executable, "job.py"], cwd=folder, check=True, timeout=120)
    return folder / "runs"


def test_the_report_on_the_attach_example_knows_its_bound_and_what_it_cannot_know(attach_example):
    code, out, err = rollscope("report", "--store", attach_example, "--run", "exp-7", "--json")
    assert (code, err) == (0, "")
    figures = json.loads(out)
    assert figures["staleness"]["bound"] == 2  # staleness_bound=2 was passed to attach()
    # its turns last microseconds: no rate can be known from them, rather than millions of tokens a second
    assert figures["throughput"]["rollout_tokens_per_s"] is None
    assert 0 < figures["throughput"]["rate_window_s"] < 1
    assert figures["funnel"]["scored_in_groups"] == 0
    assert [x["reason"] for x in figures["funnel"]["losses"]] == ["only scored attempt in its group"]
    _, text, _ = rollscope("report", "--store", attach_example, "--run", "exp-7")
    assert re.search(r"^  staleness bound\s+2 policy versions$", text, flags=re.M), text
    # how long they span depends on the machine (µs here, ms on a loaded CI runner): the sentence does not
    assert re.search(
        r"^  decoded tokens / s\s+— \(the turns span \d+ (µs|ms); a rate needs at least 1 s\)$", text, re.M
    ), text
    assert "group too small" not in text and "None" not in text
    code, out, _ = rollscope("check", "--store", attach_example, "--run", "exp-7")
    assert code == 0 and "PASS nonzero-signal: no group has two scored attempts yet" in out


def test_report_and_check_leave_nothing_in_the_temp_folder(attach_example, tmp_path):
    """A cron `check` every minute is a process a minute: each left a folder of schema files in /tmp."""
    import os
    import subprocess
    import sys

    temp = tmp_path / "tmp"
    temp.mkdir()
    for command in ("report", "check"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rollscope.app.cli",
                command,
                "--store",
                str(attach_example),
                "--run",
                "exp-7",
            ],
            env={**os.environ, "TMPDIR": str(temp)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "staleness" in done.stdout, done.stderr
        assert list(temp.iterdir()) == [], command


READER = """
import sys
from rollscope.queries import connect
con = connect(sys.argv[1], run_id="exp-7")
print(con.execute("SELECT count(*) FROM rollouts").fetchone()[0], flush=True)
sys.stdin.read()  # held open until the test kills it
"""


def _reader(store, temp, cache):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(temp), "ROLLSCOPE_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-c", READER, str(store)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_reader_killed_mid_read_leaves_nothing_in_the_temp_folder(attach_example, tmp_path):
    """The schema files every reader reads live in the user's cache, written once: a reader killed with -9 (an
    OOM kill, a pre-empted node) had no exit to remove a temp folder of its own, and each left one behind."""
    temp, cache = tmp_path / "tmp", tmp_path / "cache"
    temp.mkdir()
    for _ in range(2):  # the second reader reads the folder the first wrote
        reader = _reader(attach_example, temp, cache)
        assert int(reader.stdout.readline()) > 0, reader.stderr.read()
        reader.kill()
        reader.wait(timeout=30)
        assert list(temp.iterdir()) == []
    kept = {p.name.split("-")[0] for p in cache.iterdir()}  # and the definitions (definition_cache)
    assert kept in ({"schema"}, {"schema", "definitions"}), kept


def test_a_cache_that_cannot_be_written_reads_the_store_all_the_same(attach_example, tmp_path):
    temp, cache = tmp_path / "tmp", tmp_path / "a-file" / "cache"
    temp.mkdir()
    (tmp_path / "a-file").write_text("not a folder")
    reader = _reader(attach_example, temp, cache)
    assert int(reader.stdout.readline()) > 0, reader.stderr.read()
    reader.communicate("", timeout=30)  # ends as a process does: its temp folder removed at exit
    assert reader.returncode == 0 and list(temp.iterdir()) == []


def test_staleness_figures_have_one_name_each_in_report_and_check():
    store = ROOT / "sample_data"
    _, out, _ = rollscope("report", "--store", store, "--run", "sample", "--json")
    st = json.loads(out)["staleness"]
    assert st["beyond_bound"] > st["used_beyond_bound"] == 0  # the sample trainer drops stale samples
    assert (st["freshness_rate"], st["violations"]) == (st["within_bound_share"], st["beyond_bound"])
    _, text, _ = rollscope("report", "--store", store, "--run", "sample")
    not_used = st["beyond_bound"] - st["used_beyond_bound"]
    assert f"beyond the bound                   {st['beyond_bound']:,} samples ({not_used:,} not used" in text
    assert re.search(
        rf"^  used beyond the bound\s+{st['used_beyond_bound']} samples \(violations", text, re.M
    )
    assert f"within the bound                   {100 * st['within_bound_share']:.1f} %" in text
    assert "violations (used beyond bound)" not in text
    _, lines, _ = rollscope("check", "--store", store, "--run", "sample")
    line = next(x for x in lines.splitlines() if "staleness-violations" in x)
    assert "of consumed samples beyond the bound" in line
    assert f"; {st['used_beyond_bound']} samples used beyond the bound (none allowed)" in line
