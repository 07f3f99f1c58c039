"""Runs with transcripts, written through attach() and the helpers' content arguments as an agent job records
them: the stores the transcript viewer's tests, its benchmark and the README's screenshot open.

A coding agent works on tasks in groups: each rollout has a system prompt, the task, turns that reason and call
a shell tool, the tool's test log, a final answer, unit tests and a model judge with its rationale; the trainer
consumes each group one step later. Everything is seeded (``random.Random``) and on a simulated clock, so a
test can name what it expects: ``AgentRun`` keeps each rollout's texts and scores as ground truth.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from rollscope.collectors import attach
from rollscope.collectors.content import encode_text

NS = 1_000_000_000
T0 = 1_750_000_000 * NS
SYSTEM = (
    "You are a software engineering agent. Use the bash tool to inspect and change the repository, run the "
    "tests, and finish with a short summary of the fix."
)
# What an agent's tool output may hold, and a transcript viewer must show as text: markup, script and markdown.
ANSWER_S, SCORE_S = 2, 3  # seconds a final answer and its scoring take


def _turn_s(index: int) -> int:
    """Seconds a tool-using turn generates (times are planned: a rollout's span is opened knowing its end)."""
    return 1 + index % 3


def _tool_s(index: int) -> int:
    return 1 + index % 4


HOSTILE = (
    "<script>window.__rollscope_pwned = 1</script>\n"
    '<img src=x onerror="window.__rollscope_pwned = 2">\n'
    "# not a heading\n**not bold** [not a link](javascript:alert(1)) :red[not red]\n"
    "\x1b]0;terminal title\x07\x1b[31mnot red in a terminal\x1b[0m"
)
TASKS = (
    ("calc-add", "test_calc.py::test_add", "calc.py", "return a - b", "return a + b"),
    (
        "dates-leap",
        "test_dates.py::test_leap_year",
        "dates.py",
        "year % 4 == 0",
        "year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)",
    ),  # fmt: skip
    ("parse-int", "test_parse.py::test_negative", "parse.py", "int(text.strip('-'))", "int(text)"),
    ("cache-ttl", "test_cache.py::test_expiry", "cache.py", "now > expires", "now >= expires"),
)


@dataclass
class Attempt:
    """One rollout as written: what a test expects the viewer and `rollscope show` to show."""

    rollout_id: str
    task_id: str
    group_id: str
    step: int
    reward: float
    turns: int
    texts: list[str] = field(default_factory=list)  # every message's content (None: none), in reading order
    finish_reasons: list[str] = field(default_factory=list)


@dataclass
class AgentRun:
    run_id: str
    attempts: dict[str, Attempt] = field(default_factory=dict)

    def of_task(self, task_id: str) -> list[Attempt]:
        return [a for a in self.attempts.values() if a.task_id == task_id]


class AgentWriter:
    """One agent run's processes (rollout worker, judge, trainer) writing simulated time."""

    def __init__(self, store: Path, run_id: str, seed: int = 3, **attach_args):
        common = {"store": store, "run_id": run_id, "set_global": False, "staleness_bound": 2, **attach_args}
        self.rollout = attach(role="rollout", devices=8, model_parameters=8_000_000_000, **common)
        self.judge = attach(role="judge", devices=2, model_parameters=70_000_000_000, **common)
        self.train = attach(role="train", devices=8, model_parameters=8_000_000_000, **common)
        self.rng = random.Random(seed)
        self.run = AgentRun(run_id)
        self.clock = T0
        self.step = 0
        self.consumed: list[Attempt] = []

    def write_step(self, groups: int = 2, group_size: int = 4, **rollout_args) -> list[Attempt]:
        """Groups of attempts at tasks, then the train step that consumes the previous step's."""
        written = []
        for g in range(groups):
            task = TASKS[(self.step * groups + g) % len(TASKS)]
            group = f"s{self.step}-g{g}"
            for m in range(group_size):
                written.append(self.attempt(task, group, m, **rollout_args))
        self._train_step()
        self.consumed = written
        return written

    def attempt(
        self,
        task: tuple,
        group: str,
        member: int,
        *,
        turns: int | None = None,
        tool_output_chars: int = 0,
        hostile: bool = False,
    ) -> Attempt:
        """One rollout of ``task``: ``turns`` tool-using turns (else 1 to 3), a tool output padded to
        ``tool_output_chars``, ``hostile`` markup in a tool's output and the final answer."""
        rl, rng = self.rollout, self.rng
        task_id, test, path, wrong, right = task
        rid = f"{group}-{member}"
        solved = rng.random() < 0.5 or member == 0
        turns = turns if turns is not None else rng.randint(1, 3)
        attempt = Attempt(rid, task_id, group, self.step, float(solved), turns + 1)
        t = start = self.clock + member * NS // 5
        end = start + sum(_turn_s(i) + _tool_s(i) for i in range(turns)) * NS + (ANSWER_S + SCORE_S) * NS
        with rl.rollout(
            rid,
            task_id=task_id,
            group_id=group,
            environment="swe",
            policy_version=self.step,
            rollout_status="ok",
            reward=attempt.reward,
            start_time=start,
            end_time=end,
        ):
            for index in range(turns):
                t = self._tool_turn(attempt, index, t, test, path, tool_output_chars, hostile)
            t = self._answer(attempt, turns, t, path, wrong, right, solved, hostile)
            self._score(attempt, t, test, solved)
        self.run.attempts[rid] = attempt
        return attempt

    def _tool_turn(self, attempt, index, t, test, path, pad, hostile) -> int:
        rl, rng = self.rollout, self.rng
        command = f"pytest -x {test.split('::')[0]}" if index % 2 == 0 else f"sed -n 1,40p {path}"
        thought = f"Turn {index}: I should run `{command}` to see what fails."
        call = {"id": f"call-{index}", "name": "bash", "arguments": {"cmd": command}}
        new_input = f"Fix the failing test {test} in this repository." if index == 0 else None
        context = 1200 + 900 * index
        fields = {
            "input_tokens": context + 300,
            "cached_input_tokens": context if index else 0,
            "output_tokens": rng.randint(40, 160),
            "context_tokens": context,
            "prefill_time_s": 0.002 * (300 if index else context + 300) / 10,
            "decode_time_s": round(rng.uniform(0.4, 2.5), 3),
            "spec_draft_tokens": 120,
            "spec_accepted_tokens": rng.randint(60, 110),
            "policy_version": self.step,
        }
        end = t + _turn_s(index) * NS
        output = {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": thought}, {"type": "tool_call", **call}],
            "finish_reason": "tool_calls",
        }
        content = {"system": SYSTEM} if index == 0 else {}
        if new_input is not None:
            content["input"] = new_input
            attempt.texts += [SYSTEM, new_input]
        with rl.turn(index, start_time=t, end_time=end, output=output, **content, **fields):
            pass
        attempt.texts.append(None)  # the reply: reasoning and a tool call, no text
        attempt.finish_reasons.append("tool_calls")
        log = _test_log(test, failing=index % 2 == 0, pad=pad, hostile=hostile and index == 0)
        tool_end = end + _tool_s(index) * NS
        with rl.tool(
            "bash",
            tool_call_id=call["id"],
            arguments=call["arguments"],
            result=log,
            tool_exit_code=1 if index % 2 == 0 else 0,
            observation_tokens=len(log) // 4,
            start_time=end,
            end_time=tool_end,
        ):
            pass
        attempt.texts += [encode_text(call["arguments"]), log]
        return tool_end

    def _answer(self, attempt, index, t, path, wrong, right, solved, hostile) -> int:
        rng = self.rng
        fix = right if solved else wrong
        answer = (
            f"Changed `{path}` to `{fix}`; the test passes now." if solved else f"I could not fix {path}."
        )
        if hostile:
            answer += "\n" + HOSTILE
        end = t + ANSWER_S * NS
        finish = "stop" if solved or rng.random() < 0.5 else "length"
        fields = {
            "input_tokens": 1500 + 900 * index,
            "cached_input_tokens": 1200 + 900 * index,
            "output_tokens": 512 if finish == "length" else rng.randint(20, 80),
            "context_tokens": 1200 + 900 * index,
            "decode_time_s": round(rng.uniform(0.3, 1.5), 3),
            "policy_version": self.step,
        }
        tool_result = [{"role": "tool", "tool_call_id": f"call-{index - 1}", "content": "(output above)"}]
        output = {"role": "assistant", "content": answer, "finish_reason": finish}
        with self.rollout.turn(index, start_time=t, end_time=end, input=tool_result, output=output, **fields):
            pass
        attempt.texts += ["(output above)", answer]
        attempt.finish_reasons.append(finish)
        return end

    def _score(self, attempt, t, test, solved) -> int:
        with self.rollout.reward(
            reward_name="unit_tests", reward=attempt.reward, start_time=t, end_time=t + NS
        ):
            pass
        prompt = f"Does the change make {test} pass without breaking other tests? Answer yes or no."
        rationale = "Yes: the assertion now holds." if solved else "No: the test still fails."
        with self.judge.judge(
            rollout_id=attempt.rollout_id,
            prompt=prompt,
            rationale=rationale,
            reward=attempt.reward,
            input_tokens=800,
            output_tokens=30,
            judge_status="ok",
            start_time=t + NS,
            end_time=t + 3 * NS,
        ):
            pass
        attempt.texts += [prompt, rationale]
        return t + SCORE_S * NS

    def _train_step(self) -> None:
        start = self.clock + 120 * NS
        rewards = {}
        for a in self.consumed:
            rewards.setdefault(a.group_id, set()).add(a.reward)
        for a in self.consumed:
            decision = "used" if len(rewards[a.group_id]) > 1 else "zero_signal"
            with self.train.sample(
                a.rollout_id, self.step, decision, sample_staleness=1, start_time=start, end_time=start
            ):
                pass
        with self.train.train_step(
            self.step,
            policy_version=self.step + 1,
            train_samples=len(self.consumed),
            start_time=start,
            end_time=start + 20 * NS,
        ):
            pass
        self.step += 1
        self.clock += 180 * NS

    def finish(self) -> AgentRun:
        """One more train step consumes the last rollouts; then every process shuts down (flushing)."""
        self._train_step()
        for rl in (self.rollout, self.judge, self.train):
            rl.shutdown()
        return self.run


def _test_log(test: str, *, failing: bool, pad: int, hostile: bool) -> str:
    head = f"============================= test session starts ==============================\ncollected 12 items\n\n{test.split('::')[0]} ....."  # noqa: E501
    tail = (
        f"F\n\n=================================== FAILURES ===================================\n"
        f"FAILED {test} - AssertionError: assert 3 == 4\n========================= 1 failed, 11 passed in 0.31s ========================="  # noqa: E501
        if failing
        else ".\n========================= 12 passed in 0.29s ========================="
    )
    filler = ""
    if pad > len(head) + len(tail):
        line = "tests/test_module.py::test_case PASSED                                   [ 50%]\n"
        filler = "\n" + line * ((pad - len(head) - len(tail)) // len(line) + 1)
        filler = filler[: pad - len(head) - len(tail)]
    return head + filler + tail + ("\n" + HOSTILE if hostile else "")


def write_agent_run(
    store: Path,
    run_id: str = "agent",
    *,
    steps: int = 3,
    seed: int = 3,
    long_turns: int = 0,
    big_output: int = 0,
) -> AgentRun:
    """A finished agent run of ``steps`` steps of two groups of four; with ``long_turns`` one more rollout
    ``long-0`` of that many tool turns, with ``big_output`` one ``big-0`` whose tool output has that many
    characters, and always ``hostile-0``, whose tool output and answer hold markup and script."""
    writer = AgentWriter(store, run_id, seed, content_max_chars=max(big_output * 2, 32_768))
    for _ in range(steps):
        writer.write_step()
    task = TASKS[0]
    writer.attempt(task, "hostile", 0, turns=1, hostile=True)
    writer.clock += NS  # each later, so the task's attempts have an order
    if long_turns:
        writer.attempt(task, "long", 0, turns=long_turns)
        writer.clock += NS
    if big_output:
        writer.attempt(task, "big", 0, turns=1, tool_output_chars=big_output)
    return writer.finish()
