"""Small seeded runs written through attach(), as a job would: the stores the dashboard tests open.

Every kind of span the pages read is here (rollouts, turns with speculative decoding, tools, verifier rewards,
judges, a teacher, train steps, samples, weight syncs), with realistic losses at every funnel stage.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rollscope.collectors import attach

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
ENVIRONMENTS = ("swe", "math")


class RunWriter:
    """One run's processes (rollout workers, judge, teacher, trainer), writing simulated time."""

    def __init__(
        self,
        store: Path,
        run_id: str,
        seed: int,
        *,
        spec: bool = True,
        prefix: str = "",
        trainer: bool = True,
    ):
        self.rng = random.Random(seed)
        self.spec = spec
        self.prefix = prefix  # several writers of one run use distinct prefixes; one of them is the trainer
        self.trainer = trainer
        common = {
            "store": store,
            "run_id": run_id,
            "set_global": False,
            "staleness_bound": 1,
            "algorithm": "grpo",
        }
        self.rollout = attach(role="rollout", devices=8, model_parameters=8_000_000_000, **common)
        self.judge = attach(role="judge", devices=2, model_parameters=70_000_000_000, **common)
        self.teacher = attach(role="teacher", devices=4, model_parameters=32_000_000_000, **common)
        self.train = attach(role="train", devices=8, model_parameters=8_000_000_000, **common)
        self.clock = T0
        self.step = 0
        self.rollouts = 0
        self.queue: dict[
            int, list[tuple[str, int, str]]
        ] = {}  # consuming step -> (rollout, version, decision)

    def processes(self):
        return (self.rollout, self.judge, self.teacher, self.train)

    def write_step(self, groups: int = 4, group_size: int = 4) -> None:
        """One round: groups of rollouts at the current policy, then the train step that consumes them."""
        for g in range(groups):
            env = ENVIRONMENTS[g % len(ENVIRONMENTS)]
            rewards = self._group_rewards(group_size)
            group = f"{self.prefix}s{self.step}-g{g}"
            members = [self._rollout(env, group, m, r) for m, r in enumerate(rewards)]
            scored = {reward for _, status, was_scored, reward in members if was_scored}
            signal = len(scored) > 1
            for rid, status, was_scored, _ in members:
                delay = self.rng.choices((0, 1, 2), weights=(75, 15, 10))[0]
                decision = (
                    "invalid"
                    if status != "ok"
                    else "unscored"
                    if not was_scored
                    else "zero_signal"
                    if not signal
                    else "stale"
                    if delay > 1
                    else "used"
                )
                self.queue.setdefault(self.step + delay, []).append((rid, self.step, decision))
        self._train_step()

    def _group_rewards(self, size: int) -> list[float]:
        if self.rng.random() < 0.3:  # a uniform group: no signal
            return [1.0] * size
        return [float(self.rng.random() < 0.5) for _ in range(size - 1)] + [1.0]

    def _rollout(self, env: str, group: str, member: int, reward: float) -> tuple[str, str, bool, float]:
        rl, rng = self.rollout, self.rng
        rid = f"{group}-{member}"
        status = "infra_error" if rng.random() < 0.05 else "ok"
        scored = status == "ok" and not (env == "math" and rng.random() < 0.1)
        turns = [
            (rng.randint(2, 6) * NS, rng.randint(1, 5) * NS if env == "swe" else 0)
            for _ in range(rng.randint(1, 3))
        ]
        start = self.clock + member * NS // 10
        end = start + sum(a + b for a, b in turns) + 2 * NS
        with rl.rollout(
            rid,
            task_id=f"task-{group}",
            group_id=group,
            environment=env,
            policy_version=self.step,
            rollout_status=status,
            start_time=start,
            end_time=end,
        ):
            t = start
            for index, (turn_s, tool_s) in enumerate(turns):
                t = self._turn(index, t, turn_s)
                if tool_s:
                    with rl.tool(
                        "bash",
                        sandbox_id=f"sb-{rid}",
                        tool_exit_code=rng.choice((0, 0, 1)),
                        observation_tokens=rng.randint(500, 3000),
                        start_time=t,
                        end_time=t + tool_s,
                    ):
                        pass
                    t += tool_s
            # a scoring call's latency: 0.1-2.0 s, spread so the run's latency percentiles move as it grows, but not
            # drawn from rng, which would change every draw after it
            scoring = NS // 10 * (1 + (end - start) // NS % 20)
            if env == "math":
                self._judge(rid, t, reward if scored else None, scoring)
            elif scored:
                with rl.reward(reward_name="unit_tests", reward=reward, start_time=t, end_time=t + scoring):
                    pass
        self.rollouts += 1
        return rid, status, scored, reward

    def _turn(self, index: int, t: int, duration: int) -> int:
        rng = self.rng
        context = index * 2500
        cached = context if rng.random() < 0.8 else context // 2  # a prefix-cache miss re-prefills history
        fields = {
            "input_tokens": context + rng.randint(1000, 3000),
            "cached_input_tokens": cached,
            "output_tokens": rng.randint(100, 400),
            "context_tokens": context,
            "policy_version": self.step,
        }
        if self.spec:  # the drafter is rebuilt every 4 policy versions; acceptance decays in between
            draft, built = fields["output_tokens"], self.step - self.step % 4
            fields.update(
                spec_draft_tokens=draft,
                spec_accepted_tokens=int(draft * (0.8 - 0.08 * (self.step - built))),
                spec_verify_steps=draft // 4,
                spec_k=4,
                drafter_version=f"d{built}",
                drafter_policy_version=built,
                logprobs_source="policy",
            )
        end = t + duration
        with self.rollout.turn(index, start_time=t, end_time=end, **fields):
            pass
        return end

    def _judge(self, rid: str, t: int, reward: float | None, duration: int) -> None:
        status = "ok" if reward is not None else "timeout"
        with self.judge.judge(
            rollout_id=rid,
            input_tokens=2000,
            output_tokens=50,
            judge_status=status,
            reward=reward,
            start_time=t,
            end_time=t + duration,
        ):
            pass

    def _train_step(self) -> None:
        start = self.clock + 40 * NS
        pending = self.queue.pop(self.step, [])
        for rid, version, decision in pending:
            staleness = self.step - version
            with self.teacher.teacher(
                rollout_id=rid, teacher_tokens=1500, start_time=start, end_time=start + NS
            ):
                pass
            with self.train.sample(
                rid,
                self.step,
                decision,
                sample_staleness=staleness,
                sample_tokens=2000,
                mismatch_kl=0.001 * (1 + self.step),  # rises step by step: the Learning page's trend
                start_time=start,
                end_time=start,
            ):
                pass
        if not self.trainer:
            self.step += 1
            self.clock += 60 * NS
            return
        with self.train.train_step(
            self.step,
            policy_version=self.step + 1,
            train_samples=len(pending),
            train_tokens=2000 * len(pending),
            train_wait_s=5.0,
            train_loss=0.5,
            start_time=start,
            end_time=start + 20 * NS,
        ):
            pass
        with self.train.weight_sync(self.step + 1, start_time=start + 20 * NS, end_time=start + 22 * NS):
            pass
        self.step += 1
        self.clock += 60 * NS

    def flush(self) -> None:
        for rl in self.processes():
            assert rl.force_flush()

    def shutdown(self) -> None:
        for rl in self.processes():
            rl.shutdown()


def write_run(store: Path, run_id: str = "exp-7", *, seed: int = 7, steps: int = 4, spec: bool = True) -> int:
    """A finished run of ``steps`` train steps; returns the number of rollouts written."""
    writer = RunWriter(store, run_id, seed, spec=spec)
    for _ in range(steps):
        writer.write_step()
    writer.shutdown()
    return writer.rollouts


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    """Two runs: exp-7 (speculative decoding on) and exp-8 (off), to compare."""
    store = tmp_path_factory.mktemp("dashboard") / "store"
    write_run(store, "exp-7", seed=7, steps=5)
    write_run(store, "exp-8", seed=8, steps=3, spec=False)
    return store


@pytest.fixture
def empty_store(tmp_path) -> Path:
    store = tmp_path / "empty-store"
    store.mkdir()
    return store
