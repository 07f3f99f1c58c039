"""The advisor, shown to be right: on a simulated run with one injected bottleneck the advisor ranks that lever
first, and its estimated gain in usable rollouts per device-second is within ±25 % of the gain realized by
simulating the same run (same seed) with the lever applied (docs/advisor.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from rollscope.app.cli import main
from rollscope.queries import analyses, connect
from rollscope.simulator import config, simulate
from tests.conftest import rollscope as rollscope_cli

# lever -> (preset with that bottleneck, the config that applies the lever)
LEVERS = {
    "task_selection": ("advisor-task-selection", {"rates": {"nonzero_signal": 0.8}}),
    "scoring": ("advisor-scoring", {"levers": {"fix_scoring": True}}),
    "infra": ("advisor-infra", {"levers": {"fix_infra": True}}),
    "staleness": ("advisor-staleness", {"staleness_bound": 3}),
    "drafter_refresh": ("advisor-drafter", {"levers": {"drafter_refresh_every": 1}}),
    "spec_budget": ("advisor-spec-budget", {"levers": {"spec_long_extra_k": 2}}),
    "prefix_continuity": ("advisor-continuity", {"levers": {"prefix_continuity": True}}),
    "prompt_sharing": ("advisor-prompt-sharing", {"levers": {"share_prompt": True}}),
    "compaction": ("advisor-compaction", {"levers": {"no_compaction": True}}),
}
SMALL = {"steps": 12}  # the presets' 24 steps, halved
FAST = ("task_selection",)  # in the default suite, on a smaller run still; the rest are marked slow
SMALLER = {"steps": 8}
TOLERANCE = 0.25


def _params():
    return [pytest.param(lever, marks=() if lever in FAST else pytest.mark.slow) for lever in LEVERS]


@cache
def _root() -> Path:
    return Path(tempfile.mkdtemp(prefix="rollscope-advisor-"))


@cache
def store_with(lever: str, applied: bool, size: tuple = ()) -> Path:
    """The lever's preset simulated as run ``before`` (and, when ``applied``, as run ``after`` with the lever
    pulled) in one store of its own; ``size`` overrides the run's size (default: SMALLER for FAST levers)."""
    preset, pulled = LEVERS[lever]
    knobs = dict(size) or (SMALLER if lever in FAST else SMALL)
    store = _root() / f"{lever}-{'-'.join(f'{k}{v}' for k, v in sorted(knobs.items()))}"
    if not (store / "spans" / "run_id=before").exists():
        simulate(store, "before", config.resolve(preset, [knobs]), preset=preset, workers=1, fast=True)
    if applied and not (store / "spans" / "run_id=after").exists():
        simulate(store, "after", config.resolve(preset, [knobs, pulled]), preset=preset, workers=1, fast=True)
    return store


def teardown_module():
    shutil.rmtree(_root(), ignore_errors=True)


@pytest.mark.long
@pytest.mark.parametrize("lever", _params())
def test_the_estimated_gain_is_the_realized_one_within_25_percent(lever):
    con = connect(store_with(lever, applied=True))
    estimate = analyses.advice_lever(con, "before", lever)
    realized = analyses.realized_gain(con, "before", "after")
    assert estimate["applies"], estimate["why_not"]
    assert realized > 0.05  # the injected bottleneck is worth pulling
    assert estimate["gain"] == pytest.approx(realized, rel=TOLERANCE), (estimate["gain"], realized)


@pytest.mark.long
@pytest.mark.parametrize("lever", _params())
def test_the_injected_bottleneck_is_ranked_first(lever):
    ranking = analyses.advise(connect(store_with(lever, applied=False)), "before")
    assert ranking["lever"].iloc[0] == lever, ranking[["lever", "gain", "why_not"]].to_dict("records")
    assert ranking["gain"].iloc[0] > ranking["gain"].iloc[1]


@pytest.mark.long
def test_a_lever_that_does_not_apply_says_why_instead_of_guessing():
    tiny = (("groups_per_step", 4), ("steps", 4))
    ranking = analyses.advise(connect(store_with("spec_budget", False, tiny)), "before").set_index("lever")
    # one single-turn environment without tools or a judge
    assert not ranking.loc["prefix_continuity", "applies"]
    assert ranking.loc["prefix_continuity", "why_not"].startswith("single-turn")
    assert ranking.loc["compaction", "why_not"] == "no turn recorded a context compaction"
    assert (
        not ranking.loc["tool_waits", "applies"]
        and ranking.loc["tool_waits", "why_not"] == "no tool or sandbox calls"
    )
    assert not ranking.loc["disaggregation", "applies"]
    assert ranking.loc[~ranking["applies"], "gain"].isna().all()
    assert list(ranking["rank"]) == list(range(1, len(ranking) + 1))


@pytest.mark.long
def test_the_what_if_target_moves_the_task_selection_estimate():
    con = connect(store_with("task_selection", applied=False))
    at_80 = analyses.advice_lever(con, "before", "task_selection")
    at_90 = analyses.advice_lever(con, "before", "task_selection", target_nonzero_signal=0.9)
    assert at_80["after"] == 0.8 and at_90["after"] == 0.9
    assert at_90["usable_after"] == pytest.approx(at_80["usable_after"] * 0.9 / 0.8)
    assert at_90["gain"] > at_80["gain"]
    with pytest.raises(ValueError, match="unknown what-if"):
        analyses.advice_lever(con, "before", "task_selection", target=0.9)


@pytest.mark.long
def test_advise_prints_the_ranking_and_a_json_object_with_the_documented_keys(capsys):
    store = str(store_with("task_selection", applied=False))
    assert main(["advise", "--store", store, "--run", "before"]) == 0
    text = capsys.readouterr().out
    assert " 1. Task selection" in text and "evidence on the Funnel page" in text
    assert main(["advise", "--store", store, "--run", "before", "--steps", "2:8", "--json"]) == 0
    advice = json.loads(capsys.readouterr().out)
    assert set(advice) == {"run_id", "steps", "what_if", "baseline", "levers"}
    assert advice["steps"] == [2, 8]
    first = advice["levers"][0]
    expected = analyses.advise(connect(store), "before", steps=(2, 8)).iloc[0]
    assert first["lever"] == expected["lever"] and first["gain"] == pytest.approx(expected["gain"])
    assert advice["baseline"]["usable"] == first["usable"]


@pytest.mark.long
def test_bad_arguments_are_one_line_errors(capsys):
    store = str(store_with("task_selection", applied=False))
    assert main(["advise", "--store", store, "--run", "nope"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["advise", "--store", store, "--run", "before", "--what-if", "bogus=1"])
    assert "NAME one of" in capsys.readouterr().err


def test_a_run_the_trainer_has_not_consumed_yet_is_said_so_not_misread(tmp_path):
    """Early in a live run: rollouts written, no train step yet. The command says there is nothing to rank (as
    the Advisor page does) rather than "no rollouts" under each lever, and the staleness lever still knows the
    bound the run declared."""
    from tests.test_analyses import TinyRun

    run = TinyRun(tmp_path, bound=2)
    for m in range(2):
        run.rollout(f"g0-{m}", "g0", float(m))
    run.done()
    code, out, _ = rollscope_cli("advise", "--store", tmp_path, "--run", "tiny")
    assert code == 0 and out.splitlines()[-1] == analyses.ADVICE_NOTHING_USABLE
    assert "Levers" not in out
    (staleness,) = [row for row in analyses.advice(connect(tmp_path), "tiny") if row["lever"] == "staleness"]
    assert staleness["bound"] == 2 and staleness["why_not"] == "no sample with nonzero signal consumed yet"


@pytest.mark.long
def test_the_command_reads_the_figures_the_page_reads_without_pandas():
    """`rollscope advise` reads each analysis's row as plain values, never through a frame (its start-up cost:
    pandas and pyarrow are 0.3 s of a 1 s budget); they are the very values the page's frames hold."""
    con = connect(store_with("task_selection", applied=False))
    params = {**analyses.ADVICE_DEFAULTS, **analyses.DISAGGREGATION, "step_lo": 2, "step_hi": 8}
    params["base"] = analyses.advice_base(con, "before", (2, 8))  # every lever's starting point
    changes = []
    for name in ["advice_base", *(f"advice_{lever}" for lever in analyses.ADVICE_LEVERS)]:
        row = analyses.query_row(con, name, "before", **params)
        frame = analyses.record(analyses.query(con, name, "before", **params))
        if "_change" in row:  # what the lever changes (a STRUCT), costed by advice_gains with the others'
            _same_values(row.pop("_change"), frame["_change"], name)
            changes.append({"lever": row["lever"], **frame.pop("_change")})
        _same_values(row, frame, name)
    gains = {"base": params["base"], "levers": changes}
    rows = analyses.query_rows(con, "advice_gains", "before", **gains)
    frame = analyses.query(con, "advice_gains", "before", **gains)
    framed = {
        r["lever"]: r
        for r in ({c: analyses.plain(v) for c, v in r.items()} for r in frame.to_dict("records"))
    }
    assert len(rows) == len(framed) == len(analyses.ADVICE_LEVERS)
    for row in rows:
        _same_values(row, framed[row["lever"]], row["lever"])


def _same_values(row: dict, frame: dict, name: str) -> None:
    assert {k: type(v) for k, v in row.items()} == {k: type(v) for k, v in frame.items()}, name
    floats = {k for k, v in frame.items() if isinstance(v, float)}
    assert {k: row[k] for k in floats} == pytest.approx({k: frame[k] for k in floats}, rel=1e-12), name
    assert {k: v for k, v in row.items() if k not in floats} == {
        k: v for k, v in frame.items() if k not in floats
    }, name


@pytest.mark.long
def test_advise_as_a_command_imports_neither_pandas_nor_pyarrow_and_prints_the_pages_ranking():
    """On a run whose derived state is current (deriving it is another matter: it writes Parquet)."""
    store = str(store_with("task_selection", applied=False))
    page = analyses.advise(connect(store), "before")
    code = (
        "import json, sys\n"
        "from rollscope.app.cli import main\n"
        "code = main(['advise', '--store', sys.argv[1], '--run', 'before', '--json'])\n"
        "heavy = ('pandas', 'numpy', 'pyarrow', 'streamlit', 'plotly', 'opentelemetry.sdk')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, check=True)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
    levers = json.loads(done.stdout)["levers"]
    assert [lever["lever"] for lever in levers] == page["lever"].tolist()
    assert [lever["gain"] for lever in levers] == pytest.approx(
        [analyses.plain(gain) for gain in page["gain"]]
    )
