"""The words of the simulator's transcripts: pools of lines per kind of text, and their column-wise assembly.

A message's text is a few pieces taken from pools and joined, all of a step at once (Arrow ``take`` and
``binary_join`` over numpy codes), never a Python string per message: the `scale` preset writes millions of
messages. Names that make a task's transcript hang together (its repository, module and function) come from
the task's number; everything else from the step's own seeded draws (:mod:`simulator.transcripts`). Lines
drawn for one text are consecutive in their pool (a file read from some line on, a chain of reasoning), so a
text never repeats a line unless it is longer than the pool: the looping flag (docs/metrics.md) finds only
the loops the simulator meant.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# --- assembly -------------------------------------------------------------------------------------------------


def dumps(value: object) -> str:
    """JSON as the collectors write it (``collectors.content``): compact, not ASCII-escaped."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def strings(values) -> pa.Array:
    return pa.array(list(values), pa.string())


def concat(*parts: pa.Array | str) -> pa.Array:
    """Row by row, the parts one after the other (a str is the same in every row); a null part reads as ''."""
    arrays = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in parts]
    return pc.binary_join_element_wise(*arrays, "", null_handling="replace", null_replacement="")


def assemble(n: int, parts: list[tuple[np.ndarray, pa.Array]]) -> pa.Array:
    """``n`` rows from parts (the rows each fills, their values), in one take: filling them one by one would copy
    every text once per part. A row no part fills is null."""
    rows = np.concatenate([r for r, _ in parts] or [np.zeros(0, dtype=np.int64)])
    values = [v if v.type == pa.string() else v.cast(pa.string()) for _, v in parts]
    first = int(rows[0]) if len(rows) else 0
    if np.array_equal(rows, np.arange(first, first + len(rows))):  # parts in row order, one run: no take
        edges = [pa.nulls(first, pa.string()), pa.nulls(n - first - len(rows), pa.string())]
        return pa.concat_arrays([edges[0], *values, edges[1]])
    index = np.full(n, len(rows), dtype=np.int64)
    index[rows] = np.arange(len(rows))
    return pa.concat_arrays([*values, pa.nulls(1, pa.string())]).take(pa.array(index))


def joined(pool: pa.Array, codes: np.ndarray, counts: np.ndarray, sep: str = "\n") -> pa.Array:
    """Per row, ``counts[i]`` pieces of ``pool`` (the next ones of ``codes``, flat) joined by ``sep``."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    values = pool.take(pa.array(codes, pa.int64()))
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), values), sep)


def consecutive(size, counts: np.ndarray, start: np.ndarray, offset=0) -> np.ndarray:
    """Flat codes of ``counts[i]`` consecutive pool entries from ``start[i]``, wrapping at ``size`` (one for every
    row, or each row's: a pool of several parts, row i's from ``offset[i]``)."""
    owner = np.repeat(np.arange(len(counts)), counts)
    first = (np.cumsum(counts) - counts).astype(np.int64)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    size = np.asarray(size)[owner] if np.ndim(size) else size
    offset = np.asarray(offset)[owner] if np.ndim(offset) else offset
    return offset + (start[owner] + within) % size


def lines_for(chars: np.ndarray, fixed: int, pool: Pool | float) -> np.ndarray:
    """How many lines (of a pool, or of this mean length) bring a text of ``fixed`` characters to about
    ``chars``."""
    mean = pool.mean if isinstance(pool, Pool) else pool
    return np.maximum(0, np.rint((chars - fixed) / mean)).astype(np.int64)


def numbers(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(np.asarray(values, dtype=np.int64)), pa.string())


def formatted(render, keys: np.ndarray) -> pa.Array:
    """Per row, ``render(*key)`` of its row of ``keys`` (n × k integers): each distinct key rendered once."""
    if not len(keys):
        return pa.array([], pa.string())
    keys = np.asarray(keys, dtype=np.int64).reshape(len(keys), -1)
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    texts = strings(render(*(int(v) for v in row)) for row in distinct)
    return texts.take(pa.array(inverse.reshape(-1), pa.int64()))


class Pool:
    """Lines of one kind (as an Arrow array, and their mean length)."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.array = strings(lines)
        self.mean = max(1.0, float(np.mean([len(s) + 1 for s in lines])))

    def __len__(self) -> int:
        return len(self.lines)

    def take(self, codes: np.ndarray) -> pa.Array:
        return self.array.take(pa.array(np.asarray(codes, dtype=np.int64) % len(self.lines)))

    def cut(self) -> Pool:
        """Each line cut off part-way, mid-word: how a reply stopped by a limit or a failure ends."""
        return Pool([line[: max(1, len(line) * 3 // 5)] for line in self.lines])

    def run(self, counts: np.ndarray, start: np.ndarray, sep: str = "\n") -> pa.Array:
        """Per row, ``counts[i]`` consecutive lines from ``start[i]``, joined."""
        return joined(self.array, consecutive(len(self), counts, start), counts, sep)


# --- a task's names ---------------------------------------------------------------------------------------------

PACKAGES = ("httpkit", "tabular", "quickcache", "confparse", "routekit", "schemata", "retrying", "authlib2")
MODULES = (
    "parser",
    "client",
    "cache",
    "config",
    "router",
    "schema",
    "retry",
    "session",
    "headers",
    "encoding",
)
FUNCTIONS = (
    "parse_header",
    "merge_config",
    "normalize_path",
    "expire_entries",
    "resolve_route",
    "coerce_value",
    "backoff_delay",
    "split_cookies",
    "decode_chunk",
    "validate_field",
    "read_section",
    "build_url",
)


_TASK_VARIANTS = 24  # tasks come in this many versions of names (pools naming them hold each version)


def names(task: int) -> tuple[str, str, str]:
    """The package, module and function a coding task is about (one of ``_TASK_VARIANTS`` versions)."""
    v = task % _TASK_VARIANTS
    return PACKAGES[v % len(PACKAGES)], MODULES[(v * 7) % len(MODULES)], FUNCTIONS[(v * 5) % len(FUNCTIONS)]


def answer(task: int) -> int:
    """A math task's answer."""
    return (task * 389 + 47) % 1000


# --- system prompts -------------------------------------------------------------------------------------------

SYSTEM = {
    "coding": (
        "You are a software engineering agent working in a sandboxed checkout of a Python repository. "
        "Fix the issue the user describes with the smallest correct change.\n\n"
        "Tools:\n"
        "- run_tests(command): run the test suite or part of it (pytest) and return its output.\n"
        "- read_file(path): return a file's contents.\n"
        "- bash(command): run a shell command in the repository root and return stdout and stderr.\n"
        "- edit_file(path, old_str, new_str): replace one exact occurrence of old_str in path.\n\n"
        "Work in small steps: reproduce the failure, read the code, edit, and run the tests again. Call one "
        "tool per reply. When the tests pass, reply with a short explanation and the final patch as a unified "
        "diff in a ```diff block."
    ),
    "reasoning": (
        "You are a careful competition mathematician. Think step by step and check your arithmetic. "
        "End with the final answer as \\boxed{N}, where N is an integer."
    ),
    "judged": (
        "You are a research assistant with web access. Use web_search(query) and fetch_page(url) to find "
        "reliable sources, then answer the question in a few sentences. Start the final reply with "
        "'Answer:' and list the sources you used."
    ),
}
JUDGE_RUBRIC = (
    "You are grading a research assistant's answer. Score it from 0 to 1: 1 when it answers the question "
    "correctly, directly and with relevant sources; 0.5 when it is partly correct or unsupported; 0 when it "
    "is wrong, evasive or missing. Explain your reasoning in two or three sentences, then end with "
    "'Score: X'.\n\n"
)


# --- task statements --------------------------------------------------------------------------------------------

_SYMPTOMS = (
    "returns the wrong value for inputs with surrounding whitespace",
    "raises KeyError when the section is missing instead of returning the default",
    "drops the last element when the input length is a multiple of the chunk size",
    "ignores the timezone offset of the timestamp",
    "treats an empty string as a missing value",
    "is off by one for the last page of results",
)
_FILLER = Pool(
    [
        "This started after the refactoring in the last release; older versions behave correctly.",
        "The behaviour is the same on Python 3.10, 3.11 and 3.12.",
        "I traced it as far as the helper that normalizes the input before it is compared.",
        "Several downstream projects pin the previous release because of this.",
        "The documentation says the function should accept any mapping, not only dicts.",
        "A minimal reproduction is below; it fails on the main branch.",
        "The existing tests cover the happy path only, which is why this was not caught.",
        "Please keep the public signature unchanged: other modules import it directly.",
        "The same code path is used by the command line entry point, which shows the same problem.",
        "Performance matters here: the function is called once per request.",
        "There is a related comment in the changelog about the new parsing rules.",
        "The fix should also handle the case where the value is None.",
    ]
)


def task_statement(env: str, task: int, chars: int) -> str:
    """The user message that states a task (what the whole group is asked), about ``chars`` long."""
    if env == "coding":
        package, module, function = names(task)
        head = (
            f"Repository: acme/{package} (checked out at /workspace/{package}).\n\n"
            f"Issue #{1000 + task}: `{function}` {_SYMPTOMS[task % len(_SYMPTOMS)]}.\n\n"
            "Steps to reproduce:\n```python\n"
            f"from {package}.{module} import {function}\n\n"
            f"print({function}({' a=1 '!r}))\n```\n\n"
            f"The test `tests/test_{module}.py::test_{function}` fails. Fix the bug so that the whole test "
            "suite passes; do not modify the tests.\n\n"
        )
    elif env == "reasoning":
        a, b, c = 3 + task % 7, 11 + task % 13, 17 + task % 19
        head = (
            f"Problem {task}. Let $S$ be the sum of all positive integers $n \\le {100 * c}$ such that "
            f"${a}n + {b}$ is divisible by ${c}$. Find the remainder when $S$ is divided by $1000$.\n\n"
        )
    else:
        topic = _TOPICS[task % len(_TOPICS)]
        head = f"Question {task}: {topic[0]}\n\nAnswer with sources.\n\n"
    extra = max(0, round((chars - len(head)) / _FILLER.mean)) if env == "coding" else 0
    filler = " ".join(_FILLER.lines[(task + i) % len(_FILLER)] for i in range(extra))
    return (head + filler).rstrip()


_TOPICS = (
    ("In which year did the first transatlantic telegraph cable carry a message?", "1858", "atlantic-cable"),
    ("What is the half-life of carbon-14, to the nearest hundred years?", "5,700 years", "carbon-14"),
    ("Which element has the highest melting point?", "tungsten", "melting-points"),
    ("How many moons of Mars are known?", "two (Phobos and Deimos)", "moons-of-mars"),
    ("Who proposed the continental drift hypothesis in 1912?", "Alfred Wegener", "continental-drift"),
    ("What is the deepest point of the Earth's oceans?", "the Challenger Deep", "challenger-deep"),
)


def question(task: int) -> str:
    """A judged task's question, as its judge is shown it."""
    return _TOPICS[task % len(_TOPICS)][0]


# --- replies ----------------------------------------------------------------------------------------------------


@cache
def _leads() -> dict[str, Pool]:
    """A reply's first sentence, per tool it goes on to call (and per module it is about)."""
    per_tool = {
        "run_tests": (
            "Let me run the failing test first to see the error.",
            "I'll run the tests for {module} again to check the change.",
            "Running the whole suite to make sure nothing else broke.",
        ),
        "read_file": (
            "Let me read src/{package}/{module}.py to see how {function} works.",
            "I need to look at the helper {function} calls.",
            "Let me open the test to see what it expects.",
        ),
        "bash": (
            "Let me find where {function} is used.",
            "I'll check the lines around the comparison.",
            "Let me try the reproduction from the issue.",
        ),
        "edit_file": (
            "The bug is in {function}: it compares the raw value. I'll normalize it first.",
            "I'll handle the missing key by returning the default.",
            "Fixing the boundary condition in the loop.",
        ),
        "web_search": (
            "Let me search for a primary source on this.",
            "I'll look for a second, independent source.",
            "Searching for the exact figure.",
        ),
        "fetch_page": (
            "Let me open the most relevant result.",
            "I'll read the encyclopedia entry to confirm the date.",
            "Let me check the page the first result cites.",
        ),
        None: ("Let me call the tool.", "Next step: the tool.", "Calling the tool again."),
    }
    return {
        tool: Pool([s.format(**_names_dict(t)) for t in range(_TASK_VARIANTS) for s in sentences])
        for tool, sentences in per_tool.items()
    }


def _names_dict(task: int) -> dict[str, str]:
    package, module, function = names(task)
    return {"package": package, "module": module, "function": function}


THOUGHTS = Pool(
    [
        "The traceback points at the comparison in the inner loop.",
        "The value is stripped in one branch but not in the other.",
        "That explains why only inputs with leading spaces fail.",
        "The default is applied after the lookup, which is too late.",
        "The test expects the normalized form, not the raw string.",
        "Nothing else calls this helper with a non-string argument.",
        "The chunk boundary is computed with an exclusive end.",
        "I should keep the change minimal and not touch the public API.",
        "The previous release handled this in the caller instead.",
        "After the change the other tests in the module should still pass.",
        "The error message matches the one in the issue.",
        "There is a second call site in the command line module.",
    ]
)
REASONING = Pool(
    [
        "We need the integers n with a·n + b ≡ 0 (mod c).",
        "Since gcd(a, c) = 1, a has an inverse modulo c.",
        "Multiplying both sides by the inverse gives n ≡ -b·a⁻¹ (mod c).",
        "Let me compute the inverse by the extended Euclidean algorithm.",
        "So the solutions form one residue class r modulo c.",
        "The smallest positive solution is r itself, provided r > 0.",
        "The solutions up to the bound are r, r + c, r + 2c, …, r + (k − 1)c.",
        "Their count k is the number of terms not exceeding the bound.",
        "The sum of an arithmetic progression is k·(first + last)/2.",
        "Let me double-check the last term against the bound.",
        "Substituting the values gives the total S.",
        "Now reduce S modulo 1000.",
        "Check the congruence on one more value to be safe.",
        "Alternatively, sum over all n and subtract the non-solutions; this gives the same total.",
        "The parity of k matters for the halving, but k·(first + last) is always even here.",
        "So far the computation is consistent.",
        "I should be careful with the off-by-one at the upper bound.",
    ]
)
REASONING_LINE = REASONING.mean + 52.0  # a step of reasoning and the check that follows it


def reasoning(task: np.ndarray, counts: np.ndarray, start: np.ndarray) -> pa.Array:
    """Per row, ``counts`` steps of reasoning about its task's problem, each with a check of one more n (so no
    two steps of a chain are the same)."""
    owner = np.repeat(np.arange(len(counts)), counts)
    within = consecutive(1 << 40, counts, np.zeros(len(counts), dtype=np.int64))
    a, b, c = 3 + task % 7, 11 + task % 13, 17 + task % 19
    n = 1 + start[owner] % 50 + within
    value = a[owner] * n + b[owner]
    line = concat(
        REASONING.take(within),
        " Check n = ", numbers(n), ": ", numbers(a[owner]), "·", numbers(n), " + ", numbers(b[owner]), " = ",
        numbers(value), " ≡ ", numbers(value % c[owner]), " (mod ", numbers(c[owner]), ").",
    )  # fmt: skip
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), line), "\n")


LOOPS = Pool(
    [
        "Wait, let me recompute the inverse of a modulo c from the start. ",
        "Hmm, that contradicts the bound, so let me recount the terms again. ",
        "Let me double-check the last term against the bound once more. ",
        "So the answer is the sum, but wait, the sum needs the count first. ",
    ]
)
SEARCH_NOTES = Pool(
    [
        "The first result is an encyclopedia entry; the second is a museum page.",
        "Both sources agree on the figure.",
        "One page gives a slightly different value, probably rounded.",
        "The primary source is cited at the bottom of the article.",
        "I have enough to answer, but one more source would help.",
        "The dates in the two sources differ by a year; I'll check which is the first message.",
    ]
)


def reply_lead(tool: np.ndarray, tools: list[str], task: np.ndarray, variant: np.ndarray) -> pa.Array:
    """A non-final reply's first sentence, per row: about the tool it calls next (its index in ``tools``)."""
    leads, parts = _leads(), []
    for i, name in enumerate(tools):
        rows = np.flatnonzero(tool == i)
        if len(rows):
            codes = (task[rows] % _TASK_VARIANTS) * 3 + variant[rows] % 3
            parts.append((rows, leads.get(name, leads[None]).take(codes)))
    return assemble(len(tool), parts)


def final_coding(task: np.ndarray) -> pa.Array:
    """A coding rollout's final reply: what was wrong, and the patch (to the module ``_source`` shows)."""

    def render(t: int) -> str:
        package, module, function = names(t)
        return (
            f"The bug was in `{function}` (src/{package}/{module}.py): the value was looked up before it was "
            "normalized, so inputs with surrounding whitespace never matched. The patch strips it first; "
            f"`pytest -x tests/test_{module}.py` and the full suite now pass.\n\n"
            f"```diff\n--- a/src/{package}/{module}.py\n+++ b/src/{package}/{module}.py\n"
            f"@@ -19,7 +19,7 @@ def {function}(value, default=None):\n"
            "     if value is None:\n         return default\n"
            "-    key = value\n+    key = value.strip()\n"
            "     if key in _CACHE:\n         return _CACHE[key]\n     match = _PATTERN.match(key)\n```"
        )

    return formatted(render, (task % _TASK_VARIANTS)[:, None])


def final_reasoning(given: np.ndarray) -> pa.Array:
    """A math rollout's final reply for the answer it gives."""
    return formatted(lambda n: f"Therefore the answer is $\\boxed{{{n}}}$.", given[:, None])


def final_judged(task: np.ndarray) -> pa.Array:
    def render(t: int) -> str:
        question, found, slug = _TOPICS[t % len(_TOPICS)]
        return (
            f"Answer: {found[0].upper()}{found[1:]}. {SEARCH_NOTES.lines[t % len(SEARCH_NOTES)]}\n\n"
            f"Sources:\n[1] https://en.wikipedia.org/wiki/{slug}\n[2] https://www.britannica.com/topic/{slug}"
        )

    return formatted(render, task[:, None])


# Final replies that give no answer a verifier can read (docs/metrics.md, "Transcript flags"): per environment kind.
UNPARSABLE = {
    "coding": "I was not able to find the cause of the failure in the time available.",
    "reasoning": "I believe the answer is probably around 500, but I could not finish the computation.",
    "judged": "I could not find a reliable source for this, so I cannot say for sure.",
}


# --- tool calls and their results -------------------------------------------------------------------------------


@cache
def arguments(tool: str, failing: bool) -> Pool:
    """A tool's call arguments (JSON), per task variant; ``failing``: calls that go on to fail."""
    out = []
    for t in range(_TASK_VARIANTS):
        package, module, function = names(t)
        path = f"src/{package}/{module}.py"
        if tool == "run_tests":
            args = [{"command": f"pytest -x tests/test_{module}.py"}, {"command": "pytest -x -q tests/"}]
        elif tool == "read_file":
            missing = f"src/{package}/{module}s.py"
            args = [{"path": missing}] if failing else [{"path": path}]
        elif tool == "bash":
            args = (
                [{"command": f"pytset -x tests/test_{module}.py"}, {"command": f"cat src/{package}/util.py"}]
                if failing
                else [
                    {"command": f'grep -rn "{function}" src/'},
                    {"command": f"sed -n '30,60p' {path}"},
                    {"command": f"cat {path}"},
                    {"command": f"pytest -x tests/test_{module}.py"},
                ]
            )
        elif tool == "edit_file":
            args = [{"path": path, "old_str": "    key = value\n", "new_str": "    key = value.strip()\n"}]
        elif tool == "web_search":
            topic = _TOPICS[t % len(_TOPICS)]
            args = [{"query": topic[0]}, {"query": f"{topic[2].replace('-', ' ')} primary source"}]
        elif tool == "fetch_page":
            slug = _TOPICS[t % len(_TOPICS)][2]
            args = [{"url": f"https://en.wikipedia.org/wiki/{slug}"}]
        else:
            args = [{"input": f"task {t}"}]
        out += [dumps(a) for a in args]
    return Pool(out)


def arguments_of(tool: str, failing: np.ndarray, task: np.ndarray, variant: np.ndarray) -> pa.Array:
    """Rows' arguments of calls to ``tool``: per task variant, one of that tool's argument sets."""
    parts = []
    for flag in (False, True):
        rows = np.flatnonzero(failing == flag)
        if len(rows):
            pool = arguments(tool, flag)
            per_task = len(pool) // _TASK_VARIANTS
            codes = (task[rows] % _TASK_VARIANTS) * per_task + variant[rows] % per_task
            parts.append((rows, pool.take(codes)))
    return assemble(len(task), parts)


@cache
def _source(task: int) -> Pool:
    """The module a coding task is about, as read_file and cat show it: its header and a block per function,
    the task's own (with the bug) first."""
    package, module, function = names(task)
    error = f"{module.capitalize()}Error"
    lines = [
        f'"""{module.capitalize()} helpers of {package}."""',
        "",
        "from __future__ import annotations",
        "",
        "import re",
        "from collections.abc import Mapping",
        "",
        "_CACHE: dict[str, object] = {}",
        '_PATTERN = re.compile(r"^\\s*([A-Za-z_][A-Za-z0-9_]*)\\s*=\\s*(.*)$")',
        "",
        "",
        f"class {error}(ValueError):",
        '    """Raised when a value cannot be read."""',
    ]
    others = [f for f in FUNCTIONS if f != function]
    for name in (function, *others):
        key = "value" if name == function else "value.strip()"
        lines += [
            "",
            "",
            f"def {name}(value, default=None):",
            f'    """Read one value for {name.replace("_", " ")}; ``default`` when it is missing."""',
            "    if value is None:",
            "        return default",
            f"    key = {key}",
            "    if key in _CACHE:",
            "        return _CACHE[key]",
            "    match = _PATTERN.match(key)",
            "    if match is None:",
            f'        raise {error}(f"cannot parse {{key!r}}")',
            "    result = _CACHE[key] = (match.group(1), match.group(2).strip())",
            "    return result",
        ]
    return Pool(lines)


_CODE_LINE = 27.0  # the mean length of a source line


@cache
def _sources() -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Every task version's module source, one after the other: the lines, each version's first line and length."""
    pools = [_source(v) for v in range(_TASK_VARIANTS)]
    sizes = np.asarray([len(p) for p in pools], dtype=np.int64)
    return strings(line for p in pools for line in p.lines), np.cumsum(sizes) - sizes, sizes


def source_lines(task: np.ndarray, counts: np.ndarray, start: np.ndarray) -> pa.Array:
    """Per row, ``counts`` consecutive lines of its task's module from line ``start`` (wrapping)."""
    lines, first, sizes = _sources()
    variant = task % _TASK_VARIANTS
    return joined(lines, consecutive(sizes[variant], counts, start, first[variant]), counts)


def _grep(task: int) -> str:
    """``grep -rn FUNCTION src/``: where the task's function is defined and used."""
    package, module, function = names(task)
    found = [(i + 1, line) for i, line in enumerate(_source(task).lines) if function in line]
    found += [(12 + task % 30, f"from .{module} import {function}")]
    return "\n".join(f"src/{package}/{module}.py:{n}:{line}" for n, line in found)


_TEST_FILES = ("test_basic", "test_edge_cases", "test_errors", "test_roundtrip", "test_unicode", "test_cli", "test_compat", "test_io")  # fmt: skip


@cache
def _test_pieces(variant: int) -> tuple[str, str]:
    """A task's test log header, and the block its first failure prints (``pytest -x`` stops there)."""
    package, module, function = names(variant)
    header = (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0\n"
        f"rootdir: /workspace/{package}\nconfigfile: pyproject.toml\n"
    )
    failure = (
        f"tests/test_{module}.py ....F\n\n"
        "=================================== FAILURES ===================================\n"
        f"_{'_' * 30} test_{function} {'_' * 30}\n\n"
        f"    def test_{function}():\n"
        f">       assert {function}(' a=1 ') == ('a', '1')\n"
        f"E       AssertionError: assert None == ('a', '1')\n"
        f"E        +  where None = {function}(' a=1 ')\n\n"
        f"tests/test_{module}.py:42: AssertionError\n"
        "=========================== short test summary info ============================\n"
        f"FAILED tests/test_{module}.py::test_{function} - AssertionError: assert None == ('a', '1')\n"
        "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    )
    return header, failure


_DOTS = strings("." * (12 + 6 * i) for i in range(8))
_DOT_LINE = 60.0  # the mean length of a passing file's line


def test_log(task: np.ndarray, chars: np.ndarray, failed: np.ndarray, start: np.ndarray) -> pa.Array:
    """``pytest -x`` output about ``chars`` long: its passing files, then the first failure where ``failed``,
    and the summary line counting the tests shown."""
    if not len(task):
        return pa.array([], pa.string())
    variant = task % _TASK_VARIANTS
    pieces = [_test_pieces(v) for v in range(_TASK_VARIANTS)]
    header = strings(p[0] for p in pieces).take(pa.array(variant))
    failure = strings(p[1] for p in pieces).take(pa.array(variant))
    counts = np.maximum(1, lines_for(chars, 400 + 900 * failed, _DOT_LINE))
    owner = np.repeat(np.arange(len(task)), counts)
    file = consecutive(len(MODULES) * len(_TEST_FILES), counts, start)
    dots = (start[owner] + file) % len(_DOTS)
    line = concat(
        "tests/", strings(MODULES).take(pa.array(file % len(MODULES))), "/",
        strings(_TEST_FILES).take(pa.array(file // len(MODULES))), ".py ", _DOTS.take(pa.array(dots)),
    )  # fmt: skip
    offsets = np.zeros(len(task) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    body = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), line), "\n")
    passed = np.bincount(owner, weights=12 + 6 * dots, minlength=len(task)).astype(np.int64) + 4 * failed
    summary = formatted(_summary, np.stack([passed, failed, 1 + passed // 7], axis=1))
    fail = pc.if_else(pa.array(failed), failure, pa.scalar("", pa.string()))
    return concat(header, body, "\n", fail, summary)


def _summary(passed: int, failed: int, tenths: int) -> str:
    counts = f"1 failed, {passed} passed" if failed else f"{passed} passed"
    return f"{f' {counts} in {tenths / 10:.2f}s ':=^80}"


_SEARCH_RESULTS = Pool(
    [
        f"[{i + 1}] {title} — https://{site}/{slug}\n    {snippet}"
        for i, (title, site, slug, snippet) in enumerate(
            [
                ("History of the transatlantic cable", "atlantic-cable.com", "cablestories", "The first message crossed in August 1858."),
                ("Radiocarbon dating", "en.wikipedia.org/wiki", "Radiocarbon_dating", "Carbon-14 decays with a half-life of about 5,730 years."),
                ("Tungsten", "www.rsc.org/periodic-table", "element/74", "Tungsten has the highest melting point of all metals, 3,422 °C."),
                ("Moons of Mars", "science.nasa.gov", "mars/moons", "Mars has two small moons, Phobos and Deimos."),
                ("Alfred Wegener", "www.britannica.com/biography", "Alfred-Wegener", "Wegener proposed continental drift in 1912."),
                ("Challenger Deep", "oceanexplorer.noaa.gov", "facts/challenger-deep", "The deepest known point, about 10,935 m."),
                ("Forum thread: is this true?", "forum.example.org", "t/18342", "Someone says it was 1866, which is the first lasting cable."),
                ("Encyclopedia entry", "www.encyclopedia.com", "science/entry", "A summary with references to primary sources."),
            ]
        )
    ]
)  # fmt: skip
_PAGE = Pool(
    [
        "From Wikipedia, the free encyclopedia",
        "This article is about the scientific topic. For other uses, see the disambiguation page.",
        "The first measurements were made in the nineteenth century and refined many times since.",
        "Early estimates differed widely because the instruments of the time were imprecise.",
        "Modern values are known to within a fraction of a percent.",
        "The result was confirmed independently by two laboratories.",
        "A later survey found the same value with a smaller uncertainty.",
        "The discovery was reported in the newspapers of several countries within days.",
        "Historians disagree about who deserves the credit for the first observation.",
        "See also: History of science; List of physical constants.",
        "References",
        "1. ^ Smith, J. (1998). A history of measurement. Cambridge University Press.",
        "2. ^ Jones, A. (2004). 'Revisiting the early data'. Journal of Historical Science 12 (3): 45–67.",
        "3. ^ Brown, K. (2011). Instruments and their makers. Oxford University Press.",
        "External links",
    ]
)


def tool_result(
    name: str,
    task: np.ndarray,
    chars: np.ndarray,
    exit_code: np.ndarray,
    variant: np.ndarray,
    start: np.ndarray,
) -> pa.Array:
    """What calls of tool ``name`` returned, about ``chars`` long: its output, or an error where it failed
    (run_tests' non-zero exit is a failing test: its log)."""
    failed = exit_code != 0
    if name == "run_tests":
        return test_log(task, chars, failed, start)
    ok, bad = np.flatnonzero(~failed), np.flatnonzero(failed)
    keys = np.stack([task[bad] % _TASK_VARIANTS, variant[bad] % 2, exit_code[bad]], axis=1)
    errors = formatted(lambda t, v, code: _error(name, t, v, code), keys)
    return assemble(
        len(task), [(ok, _output(name, task[ok], chars[ok], variant[ok], start[ok])), (bad, errors)]
    )


def _output(
    name: str, task: np.ndarray, chars: np.ndarray, variant: np.ndarray, start: np.ndarray
) -> pa.Array:
    """A tool's output when it ran (not run_tests'): the file it read or edited, what bash printed (grep,
    sed, cat, pytest: the argument set it was called with, ``arguments``), search results, a page."""
    if name == "edit_file":
        head = formatted(_edited, (task % _TASK_VARIANTS)[:, None])
        return concat(head, source_lines(task, lines_for(chars, 120, _CODE_LINE), start))
    if name in ("read_file", "bash"):
        which = variant % 4 if name == "bash" else np.full(len(task), 2)  # bash: grep, sed, cat, pytest
        grep, code, tests = np.flatnonzero(which == 0), np.flatnonzero((which == 1) | (which == 2)), np.flatnonzero(which == 3)  # fmt: skip
        lines = lines_for(chars[code], 0, _CODE_LINE)
        return assemble(
            len(task),
            [
                (grep, formatted(_grep, (task[grep] % _TASK_VARIANTS)[:, None])),
                (code, source_lines(task[code], lines, np.where(which[code] == 1, start[code], 0))),
                (tests, test_log(task[tests], chars[tests], np.zeros(len(tests), dtype=bool), start[tests])),
            ],
        )
    pool = _SEARCH_RESULTS if name == "web_search" else _PAGE
    return pool.run(lines_for(chars, 0, pool) + 1, start)


def _edited(task: int) -> str:
    package, module, _ = names(task)
    return (
        f"The file src/{package}/{module}.py has been edited. Here's the result of running `cat -n` on a "
        "snippet of the edited file:\n"
    )


def _error(name: str, task: int, variant: int, code: int) -> str:
    """A failed call's output: what a tool prints when it, not the code under test, fails."""
    package, module, _ = names(task)
    if name == "read_file":
        return (
            "Traceback (most recent call last):\n"
            '  File "/opt/tools/read_file.py", line 14, in main\n'
            "    with open(path) as f:\n"
            f"FileNotFoundError: [Errno 2] No such file or directory: 'src/{package}/{module}s.py'"
        )
    if name == "bash":
        if variant:
            return f"cat: src/{package}/util.py: No such file or directory"
        return "bash: line 1: pytset: command not found"
    if name == "edit_file":
        return f"Error: old_str not found in src/{package}/{module}.py (no change made)"
    if name == "web_search":
        return "Error: search backend timed out after 30 s"
    if name == "fetch_page":
        return "Error: HTTP 404 Not Found"
    return f"Error: {name} exited with status {code}"


# --- the judge ----------------------------------------------------------------------------------------------------


def rationale(reward: np.ndarray) -> pa.Array:
    """A judge's rationale for the score it gave (tenths)."""

    def render(tenths: int) -> str:
        if tenths >= 7:
            text = (
                "The response answers the question directly and the figure matches the sources it cites. "
                "The two sources are relevant and independent."
            )
        elif tenths >= 4:
            text = (
                "The response is partly correct, but its main claim is not supported by the sources it cites."
            )
        else:
            text = (
                "The response does not answer the question: the figure it gives is wrong, and the sources it "
                "lists do not support it."
            )
        return f"{text}\n\nScore: {tenths / 10:g}"

    return formatted(render, np.rint(reward * 10).astype(np.int64)[:, None])
