"""README.md and docs/ promise commands, views, columns and variables: each must exist, and each that exists
must be promised. README is the user's guide and links the docs that list them (commands, views, configuration,
benchmarks); ``python -m tests.test_docs`` prints docs/configuration.md's table from the code, ``python -m
tests.test_docs tables`` docs/store.md's table of the derived tables (``queries.tables.markdown``)."""

from __future__ import annotations

import re
import sys

import pytest

from rollscope import semconv
from rollscope.app import pages as app_pages
from rollscope.app.cli import build_parser
from rollscope.queries import catalog, tables
from rollscope.settings import ENV
from tests.conftest import ROOT, rollscope

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def _doc(name: str) -> str:
    return (DOCS / name).read_text()


def configuration_table() -> str:
    """docs/configuration.md's table: every variable of `Settings`, with its meaning, in ENV's order."""
    lines = ["| variable | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {meaning.replace('|', chr(92) + '|')} |" for name, meaning in ENV.items()]
    return "\n".join(lines)


def _commands() -> set[str]:
    parser = build_parser()
    return set(parser._subparsers._group_actions[0].choices)


def test_semconv_doc_is_generated_from_the_code():
    assert (ROOT / "docs" / "semconv.md").read_text() == semconv.markdown()


def test_docs_list_every_view_with_its_real_columns():
    assert catalog.markdown() in _doc("views.md")
    assert set(catalog.view_names()) == set(catalog.VIEW_DOCS)


@pytest.mark.parametrize("doc", ["commands", "configuration", "views", "benchmarks", "metrics"])
def test_readme_links_the_docs_that_list_what_it_leaves_out(doc):
    assert f"](docs/{doc}.md)" in README


def test_readme_and_the_dashboard_doc_name_every_page_and_only_real_ones():
    pages = app_pages.TITLES
    assert set(pages) == {p.stem for p in (ROOT / "app" / "screens").glob("*.py")}
    section = README[README.index("Pages: ") : README.index("What each shows")]
    assert {" ".join(name.split()) for name in re.findall(r"\*\*([^*]+)\*\*", section)} == set(pages.values())
    table = _doc("dashboard.md").split("## Pages", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| ([^|`]+?) \|", table, flags=re.M)) - {"page"} == set(pages.values())


def test_docs_list_every_benchmark_and_only_real_ones():
    listed = set(re.findall(r"^\| `python -m benchmarks\.(\w+)", _doc("benchmarks.md"), flags=re.M))
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__"}
    assert listed == scripts


def test_docs_document_every_command_and_only_real_ones():
    documented = set(re.findall(r"^\| `rollscope (\w+)", _doc("commands.md"), flags=re.M))
    assert documented == _commands()


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_command_has_help(command):
    with pytest.raises(SystemExit) as exit_:
        rollscope(command, "--help")
    assert exit_.value.code == 0


def test_docs_document_every_variable_with_its_meaning_and_only_real_ones():
    text = _doc("configuration.md")
    assert configuration_table() in text
    assert set(re.findall(r"`((?:ROLLSCOPE|OTEL)_\w+)`", text)) == set(ENV)


def test_readme_gives_exactly_two_setup_commands_and_names_the_full_run_ci_does():
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    assert "`make test-all` is the full run CI does" in " ".join(section.split())
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert ci == ["make test-all"]


def test_store_doc_lists_every_derived_table_as_declared():
    assert tables.markdown() in _doc("store.md"), "docs/store.md: paste `python -m tests.test_docs tables`"


def test_docs_name_every_table_macro_a_user_can_query():
    from rollscope.queries import sqlfiles

    text = "".join(sqlfiles.load(n) for n in sqlfiles.folder("analyses/macros"))
    public = {m for m in re.findall(r"CREATE OR REPLACE MACRO (\w+)\(", text) if not m.startswith("_")}
    assert (
        public
        == set(re.findall(r"^\| `(\w+)\(", _doc("views.md"), flags=re.M))
        == {"rollout_steps", "rollout_stages", "consumed_samples"}
    )


def test_docs_list_every_analysis_and_only_real_ones():
    """docs/report.md's list is where README sends users for the analyses they can call from Python."""
    import inspect

    from rollscope.queries import analyses

    text = (ROOT / "docs" / "report.md").read_text()
    listed = text.split("one-row figures):", 1)[1].split("`rollscope.queries.report", 1)[0]
    named = set(re.findall(r"`(\w+)", re.sub(r" \(by [^)]*\)", "", listed)))  # not the by= choices
    analyses_ = {
        name
        for name, f in inspect.getmembers(analyses, inspect.isfunction)
        if f.__module__ == "rollscope.queries.analyses"
        and not name.startswith("_")
        and list(inspect.signature(f).parameters)[:2] == ["con", "run_id"]
    }
    assert named == (analyses_ - {"require_run"}) | {"what_if"}  # require_run: a guard, what_if: no run


def test_readme_shows_the_overview_and_a_transcript_and_says_what_a_bare_machine_needs():
    images = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", README)
    assert images == ["docs/overview.png", "docs/rollout.png"]  # the Overview, and a rollout's transcript
    for image in images:
        assert (ROOT / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for needed in ("python3-venv", "`make`", "chromium"):
        assert needed in README
    after = README[README.index("## Attach to a job") : README.index("## Look at a run")]
    assert (
        "rollscope dashboard --store runs" in after and "rollscope report --store runs --run exp-7" in after
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["tables"]:
        print(tables.markdown(), end="")
    else:
        print(configuration_table())
