"""The planner (``Planner``): the deterministic plan of a run, one train step at a time.

For each step the planner draws the groups the step consumes (task, environment, G attempts), decides which
attempts fail, which go unscored, which groups carry signal and which arrive stale — each a stratified
decision with a probability that drifts over the run — then generates every turn, tool call, judge and
teacher call with its tokens and latencies, and finally places the groups on the simulated clock:

* policy version *v* is on the rollout servers from ``available[v]`` (the end of the weight sync that
  delivered it) until ``available[v + 1]``; a group of version *v* is dispatched inside that window;
* the trainer consumes groups in the order they complete: a group belongs to step *s* when its last rollout
  ends after the data-ready time of step *s − 1* and at or before that of step *s* (``ready``);
* step *s* starts when version *s* is available, waits until ``ready``, computes, and a weight sync then
  delivers version *s + 1*.

Times are seconds from the run's time zero; :mod:`simulator.records` turns them into spans.

Group- and rollout-level decisions are made one by one (a step has a few hundred rollouts); the turns and
tool calls (tens per rollout) are drawn and computed for the whole step at once, one numpy array per field
and one draw per field from the step's own generator (``np.random.default_rng((seed, step))``), so their
cost is a few array operations per step, not Python work per span.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from rollscope.semconv import ROLLOUT_ABORTED, ROLLOUT_INFRA_ERROR
from rollscope.simulator import training
from rollscope.simulator.config import Environment, SimConfig
from rollscope.simulator.plan import (
    Group,
    Rollout,
    Scoring,
    StepPlan,
    ToolColumns,
    Turn,
    TurnColumns,
)
from rollscope.simulator.sampling import (
    Quota,
    Stratified,
    allocate,
    derive_seed,
    lognormal,
    lognormal_array,
    rng_for,
    segment_exclusive_sum,
    sigmoid,
    tokens,
    tokens_array,
    weighted_index,
)

GAP_S = 0.02  # between a turn and the tool call it makes, and back


class Planner:
    """Yields :class:`StepPlan` objects in step order; the same config always yields the same plans."""

    def __init__(self, config: SimConfig):
        self.c = config
        c = config
        self.max_lag = max(len(c.lag_weights), len(c.excursion_lag_weights)) - 1
        first_version = max(0, c.first_step - self.max_lag)
        self.drafters = self._drafter_schedule(first_version)
        self.logprob_versions = self._position_range(c.logprob_drafter)
        self.excursion_steps = self._position_range(c.staleness_excursion)
        self.mismatch_steps = self._position_range(c.mismatch_excursion)
        self.available: dict[int, float] = {}
        head = min(c.first_step, self.max_lag) * c.warmup_period_s
        for v in range(first_version, c.first_step + 1):
            self.available[v] = head - (c.first_step - v) * c.warmup_period_s
        self.ready_prev = self.available[c.first_step]
        self._strata: dict[tuple, Stratified | Quota] = {}
        self._env_carry = [0.0] * len(c.environments)
        self._difficulty: dict[tuple, float] = {}
        self._prompt: dict[tuple, int] = {}
        self._groups_made = 0
        self._rollouts_made = 0
        self._turn_seed = derive_seed(c.seed, "turns")
        self._continuity_seed = derive_seed(
            c.seed, "continuity"
        )  # its own stream: the turns' draws stay as they were
        self._env_index = {e.name: i for i, e in enumerate(c.environments)}
        self._tools = _ToolTable(c.environments)

    # --- schedule of events ---------------------------------------------------------------------------------

    def _position(self, fraction: float) -> int:
        return self.c.first_step + int(round(fraction * self.c.steps))

    def _position_range(self, span: list[float] | None) -> tuple[int, int] | None:
        if not span:
            return None
        return self._position(span[0]), max(self._position(span[0]) + 1, self._position(span[1]))

    def _drafter_schedule(self, first_version: int) -> list[tuple[int, str]]:
        """(policy version built from, drafter version), oldest first."""
        built = [first_version] + sorted(
            {self._position(f) for f in self.c.drafter_refreshes} | self._lever_refreshes(first_version)
        )
        return [(v, f"drafter-{i}") for i, v in enumerate(built)]

    def _lever_refreshes(self, first_version: int) -> set[int]:
        """levers.drafter_refresh_every: a refresh every N policy versions after the first drafter."""
        every = self.c.levers.drafter_refresh_every
        if every <= 0:
            return set()
        return set(range(first_version + every, self.c.first_step + self.c.steps + 1, every))

    def drafter_for(self, version: int) -> tuple[str, int]:
        name, built = self.drafters[0][1], self.drafters[0][0]
        for v, n in self.drafters:
            if v <= version:
                name, built = n, v
        return name, built

    # --- the run --------------------------------------------------------------------------------------------

    def steps(self) -> Iterator[StepPlan]:
        index = 0
        while True:
            yield self.plan_step(index)
            index += 1

    def plan_step(self, index: int) -> StepPlan:
        c = self.c
        s = c.first_step + index
        x = min(1.0, index / max(1, c.steps - 1))
        rng = rng_for(c.seed, "step", s)
        draws = np.random.default_rng((self._turn_seed, s))  # the step's turns and tool calls
        groups = self._groups(rng, s, x)
        rollouts = [r for g in groups for r in g.rollouts]
        shape = self._shape(draws, rollouts, x, s)
        self._fail(rng, rollouts, x)
        self._score(rng, groups, x, s)
        excursion = (
            self.excursion_steps is not None and self.excursion_steps[0] <= s < self.excursion_steps[1]
        )
        self._staleness(rng, groups, s, excursion)
        continuity = np.random.default_rng((self._continuity_seed, s))
        turns, tools = self._generate(draws, continuity, rollouts, shape)
        ready = self._place(rng, groups, s)
        offsets = np.asarray([r.offset for r in rollouts], dtype=float)
        turns.shift(offsets)
        tools.shift(offsets)
        plan = self._train(rng, s, index, rollouts, ready, excursion)
        plan.turns, plan.tools = turns, tools
        self._mismatch(s, rollouts)
        if self.c.silent_worker:
            self._silence(plan, groups)
        return plan

    def _stratum(self, kind: str, env: str, fixed: float | None) -> Stratified:
        """Per environment when the rate is emergent; one for the run when a preset fixes it."""
        key = (kind, env if fixed is None else "*")
        if key not in self._strata:
            self._strata[key] = Stratified(rng_for(self.c.seed, "stratum", *key))
        return self._strata[key]

    def _quota(self, kind: str, key: object) -> Quota:
        if (kind, key) not in self._strata:
            self._strata[(kind, key)] = Quota(rng_for(self.c.seed, "quota", kind, key))
        return self._strata[(kind, key)]

    # --- groups and their shapes ----------------------------------------------------------------------------

    def _groups(self, rng, s: int, x: float) -> list[Group]:
        c = self.c
        counts = allocate([e.share for e in c.environments], c.groups_per_step, self._env_carry)
        envs = [e for e, n in zip(c.environments, counts, strict=True) for _ in range(n)]
        rng.shuffle(envs)
        skill = c.skill_start + c.skill_gain * x
        groups = []
        for j, env in enumerate(envs):
            task = rng.randrange(env.tasks)
            group_id = f"s{s:05d}-g{j:03d}"
            group = Group(group_id, env, task, sigmoid(skill - self._task_difficulty(env, task)), [])
            server = self._groups_made % c.rollout.count
            self._groups_made += 1
            for m in range(c.group_size):
                r = Rollout(
                    f"{group_id}-r{m}",
                    group_id,
                    f"{env.name}/{task:04d}",
                    env,
                    m,
                    rng_for(c.seed, "rollout", s, j, m),
                    index=self._rollouts_made,
                    server=server,
                    sandbox=self._rollouts_made % c.sandbox.count,
                )
                self._rollouts_made += 1
                group.rollouts.append(r)
            groups.append(group)
        return groups

    def _task_difficulty(self, env: Environment, task: int) -> float:
        key = (env.name, task)
        if key not in self._difficulty:
            self._difficulty[key] = rng_for(self.c.seed, "task", *key).gauss(
                env.difficulty_mean, env.difficulty_spread
            )
        return self._difficulty[key]

    def _task_prompt(self, env: Environment, task: int) -> int:
        key = (env.name, task)
        if key not in self._prompt:
            self._prompt[key] = tokens(rng_for(self.c.seed, "prompt", *key), env.prompt_tokens, 0.35, 32)
        return self._prompt[key]

    def _shape(self, draws: np.random.Generator, rollouts: list[Rollout], x: float, s: int) -> _Shape:
        """Turns, output lengths and tool calls: what each agent will do, before versions and caches.

        The number of turns is drawn per rollout; every turn's output length and every tool call (which
        tool, its observation, its seconds, its exit code) for the whole step at once."""
        c, tools = self.c, self._tools
        planned = []
        for r in rollouts:
            env, n = r.env, r.env.turns_min
            if env.turns_max > env.turns_min:
                n += int(r.rng.expovariate(1.0 / max(0.5, env.turns_mean - env.turns_min)))
            r.turn_budget_cut = n > env.turns_max  # the agent would have gone on: its turn budget stopped it
            planned.append(min(n, env.turns_max))
        n = np.asarray(planned, dtype=np.int64)
        env_of = np.asarray([self._env_index[r.env.name] for r in rollouts], dtype=np.int64)
        owner = np.repeat(np.arange(len(rollouts)), n)
        envs = c.environments
        shift = [training.length_factor(c, s, e.name) for e in envs]  # 1 but where a failure shifts lengths
        mean = np.asarray(
            [e.output_tokens * (1 + e.length_growth * x) * f for e, f in zip(envs, shift, strict=True)]
        )
        mean = mean[env_of][owner]
        sigma = np.asarray([e.output_sigma for e in envs])[env_of][owner]
        high = np.asarray([e.output_max for e in envs])[env_of][owner]
        outputs = tokens_array(draws, mean, sigma, 1, high)
        calls = np.where(tools.count[env_of] > 0, np.maximum(n - 1, 0), 0)  # one between two turns
        call_owner = np.repeat(np.arange(len(rollouts)), calls)
        tool = tools.choose(draws, env_of[call_owner])
        exit_code = (draws.random(len(tool)) < tools.fail_exit_rate[tool]).astype(np.int64)
        observation = tokens_array(draws, tools.observation_tokens[tool], 0.5, 8, 1 << 30)
        seconds = lognormal_array(draws, tools.seconds[tool], 0.8)
        output_sums = np.bincount(owner, weights=outputs, minlength=len(rollouts))
        tool_sums = np.bincount(call_owner, weights=seconds, minlength=len(rollouts))
        for i, r in enumerate(rollouts):
            r.planned_turns, r.planned_output = int(n[i]), int(output_sums[i])
            r.planned_tool_s = float(tool_sums[i])
        return _Shape(n, owner, outputs, calls, call_owner, tool, exit_code, observation, seconds)

    # --- funnel decisions -----------------------------------------------------------------------------------

    def _fail(self, rng, rollouts: list[Rollout], x: float) -> None:
        order = list(rollouts)
        rng.shuffle(order)
        fixed = self.c.rates.completion
        for r in order:
            env = r.env
            p = 1 - fixed if fixed is not None else env.infra_failure_rate + env.infra_failure_drift * x
            p = 0.0 if self.c.levers.fix_infra else p
            if not self._stratum("fail", env.name, fixed).choose(p):
                continue
            r.status = ROLLOUT_ABORTED if r.rng.random() < env.aborted_share else ROLLOUT_INFRA_ERROR
            r.fail_turn = r.rng.randrange(r.planned_turns)
            r.fail_in_tool = (
                r.status == ROLLOUT_INFRA_ERROR and env.kind == "coding" and r.fail_turn < r.planned_turns - 1
            )
            r.scored = False

    def _score(self, rng, groups: list[Group], x: float, s: int) -> None:
        completed = [r for g in groups for r in g.rollouts if r.completed]
        rng.shuffle(completed)
        fixed = self.c.rates.scoring
        for r in completed:
            env = r.env
            p = 1 - fixed if fixed is not None else env.scoring_failure_rate + env.scoring_failure_drift * x
            p = 0.0 if self.c.levers.fix_scoring else p
            r.scored = not self._stratum("unscored", env.name, fixed).choose(p)
        order = list(groups)
        rng.shuffle(order)
        for g in order:
            self._rewards(g, s)

    def _rewards(self, g: Group, s: int) -> None:
        """Decide whether the group's scored rewards are all equal, then draw rewards that honour it. Where the
        reward is hacked (simulator/training.py) the judge calls that share of the failures a success; where the
        groups collapse, they are all-equal as often as that failure says."""
        scored = [r for r in g.rollouts if r.scored]
        hacked = training.hacked(self.c, g.env.name, s)
        n, p = len(scored), g.p_success + hacked * (1 - g.p_success)
        if n == 0:
            return
        rng = scored[0].rng
        if n == 1:
            scored[0].reward = self._reward_value(g.env, rng.random() < p, rng)
            return
        fixed = self.c.rates.nonzero_signal
        collapsed = training.nonzero_signal(self.c, s)
        fixed = collapsed if collapsed is not None else fixed
        all_equal = p**n + (1 - p) ** n
        q = 1 - fixed if fixed is not None else all_equal
        if self._quota("equal", g.env.name if fixed is None else "*").choose(q, n):
            success = rng.random() < (p**n / all_equal if all_equal > 0 else 0.5)
            for r in scored:
                r.reward = 1.0 if success else 0.0
            return
        k = _successes_not_all_equal(rng, n, p)
        winners = set(rng.sample(range(n), k))
        for i, r in enumerate(scored):
            r.reward = self._reward_value(g.env, i in winners, rng)
            r.signal = True

    @staticmethod
    def _reward_value(env: Environment, success: bool, rng) -> float:
        if env.kind != "judged":
            return 1.0 if success else 0.0
        return round(rng.uniform(0.7, 1.0), 1) if success else round(rng.uniform(0.0, 0.4), 1)

    def _staleness(self, rng, groups: list[Group], s: int, excursion: bool) -> None:
        """Stale or fresh per group (stratified by signal), then lags by duration rank: long groups lag more."""
        c = self.c
        weights = list(c.excursion_lag_weights if excursion else c.lag_weights)
        weights = weights[: s + 1] if len(weights) > s else weights
        bound = c.staleness_bound
        fresh_w, stale_w = weights[: bound + 1], weights[bound + 1 :]
        total = sum(weights)
        feasible = s > bound
        if c.rates.freshness is not None:
            q = (1 - c.rates.freshness) if feasible else 0.0
        else:
            q = sum(stale_w) / total if total else 0.0
        for g in groups:
            g.estimate = max(_estimate(r, c) for r in g.rollouts)
        order = list(groups)
        rng.shuffle(order)
        stale = [g for g in order if feasible and self._quota("stale", g.signal).choose(q, _weight(g))]
        chosen = {id(g) for g in stale}
        fresh = [g for g in order if id(g) not in chosen]
        self._assign_lags(rng, fresh, fresh_w or [1.0], 0)
        self._assign_lags(rng, stale, stale_w if sum(stale_w) > 0 else [1.0], bound + 1)
        for g in groups:
            for r in g.rollouts:
                r.step, r.staleness, r.policy_version = s, g.lag, s - g.lag
                r.drafter_version, r.drafter_policy_version = self.drafter_for(r.policy_version)

    @staticmethod
    def _assign_lags(rng, groups: list[Group], weights: list[float], offset: int) -> None:
        if sum(weights) <= 0:
            weights = [1.0]
        lags = sorted(offset + weighted_index(rng, weights) for _ in groups)
        for g, lag in zip(sorted(groups, key=lambda g: g.estimate), lags, strict=True):
            g.lag = lag

    # --- turns, tools, scoring ------------------------------------------------------------------------------

    def _generate(
        self,
        draws: np.random.Generator,
        continuity: np.random.Generator,
        rollouts: list[Rollout],
        shape: _Shape,
    ) -> tuple[TurnColumns, ToolColumns]:
        """Every turn and tool call of the step, timed from each rollout's first turn (placement shifts
        them), then each completed rollout's scoring calls.

        A rollout runs its planned turns up to the one it fails at (if it fails); a tool call follows every
        turn but its last, and the failing one when the sandbox is lost. Each turn reads the task prompt
        and the history so far (earlier outputs and observations), compacted where the environment compacts long
        contexts, finds part of it in the prefix cache, waits in the queue, prefills what is new and decodes,
        speculatively where the environment drafts.
        """
        c, R = self.c, len(rollouts)
        fail_turn = np.asarray([r.fail_turn for r in rollouts], dtype=np.int64)
        in_tool = np.asarray([r.fail_in_tool for r in rollouts], dtype=bool)
        ran = np.where(fail_turn < 0, shape.turns, fail_turn + 1)  # turns each rollout runs
        k_planned = _position(shape.owner, shape.turns)
        keep = k_planned < ran[shape.owner]
        owner, k, output = shape.owner[keep], k_planned[keep], shape.outputs[keep].copy()
        T = len(owner)
        k_call = _position(shape.call_owner, shape.calls)
        co = shape.call_owner
        called = (k_call < ran[co] - 1) | (in_tool[co] & (k_call == fail_turn[co]))
        call_owner, tool = co[called], shape.tool[called]
        lost = in_tool[call_owner] & (k_call[called] == fail_turn[call_owner])
        seconds = shape.seconds[called]
        seconds = np.where(lost, seconds * draws.random(len(seconds)), seconds)
        observation = np.where(lost, 0, shape.observation[called])
        exit_code = np.where(lost, 137, shape.exit_code[called])
        # the turn each call follows: calls come in turn order, one per turn that has one
        has_call = (k < ran[owner] - 1) | (in_tool[owner] & (k == fail_turn[owner]))
        has_call &= shape.calls[owner] > k
        # the failing turn (not a lost sandbox) is cut short
        failing = (k == fail_turn[owner]) & ~in_tool[owner]
        cut = np.maximum(1, (output * draws.random(T)).astype(np.int64))
        output = np.where(failing, cut, output)
        aborted = np.asarray([r.status == ROLLOUT_ABORTED for r in rollouts], dtype=bool)
        error = np.where(failing, np.where(aborted[owner], 1, 2), 0)
        # what each turn reads: prompt + history; its context is that less the last observation
        prompt = np.asarray(
            [self._task_prompt(r.env, int(r.task_id.split("/")[1])) for r in rollouts], dtype=np.int64
        )
        obs_by_turn = np.zeros(T, dtype=np.int64)
        obs_by_turn[has_call] = observation
        history = segment_exclusive_sum(output + obs_by_turn, owner)
        input_tokens = prompt[owner] + history
        last_obs = np.where(k > 0, np.concatenate(([0], obs_by_turn[:-1])), 0)
        context = np.where(k == 0, 0, input_tokens - last_obs)
        env = np.asarray([self._env_index[r.env.name] for r in rollouts], dtype=np.int64)[owner]
        cut, before, after, sample = self._compact(owner, k, env, prompt[owner], context)
        input_tokens, context = input_tokens - cut, context - cut
        member = np.asarray([r.member for r in rollouts], dtype=np.int64)[owner]
        cached, prefix, breaks = self._cached(
            draws, continuity, k, env, member, prompt[owner], context, before > 0
        )
        prefill_s = (input_tokens - cached) / c.prefill_tokens_per_s
        ttft_s = draws.exponential(c.queue_seconds, T) + prefill_s
        spec = self._speculate(draws, rollouts, owner, context, output)
        step_s = 1.0 / c.decode_tokens_per_s
        decode_s = np.where(
            spec["spec_k"] > 0, spec["verify_steps"] * step_s * (1 + 0.05 * spec["spec_k"]), output * step_s
        )
        # the clock: turn, then its tool call between two gaps, then the next turn
        turn_s = ttft_s + decode_s
        call_s = np.zeros(T)
        call_s[has_call] = seconds
        block = turn_s + np.where(has_call, 2 * GAP_S + call_s, 0.0)
        start = segment_exclusive_sum(block, owner)
        end = start + turn_s
        call_start = end[has_call] + GAP_S
        turns = TurnColumns(
            owner, k, start, end, input_tokens, cached, output, context, prefill_s, decode_s, ttft_s,
            error=error, prefix=prefix, continuity=breaks, compact_before=before, compact_after=after,
            sample=sample, **spec,
        )  # fmt: skip
        tools = ToolColumns(
            call_owner,
            tool,
            call_start,
            call_start + seconds,
            observation,
            exit_code,
            lost,
            self._tools.names,
        )
        finished = np.bincount(owner, weights=block, minlength=R)  # last turn's end, or lost call's + gap
        turn_counts = np.bincount(owner, minlength=R)
        call_counts = np.bincount(call_owner, minlength=R)
        first_turn = np.concatenate(([0], np.cumsum(turn_counts)[:-1]))
        first_call = np.concatenate(([0], np.cumsum(call_counts)[:-1]))
        last = first_turn + turn_counts - 1
        trajectory = (input_tokens[last] + output[last]).tolist()
        answers = output[last].tolist()
        earlier = _samples_before(owner, before)
        for i, r in enumerate(rollouts):
            r.turn_columns, r.turn_rows = turns, (int(first_turn[i]), int(turn_counts[i]))
            r.tool_columns, r.tool_rows = tools, (int(first_call[i]), int(call_counts[i]))
            r.sample_tokens = [*earlier[i], trajectory[i]] if i in earlier else []
            r.prompt, r.trajectory_tokens = int(prompt[i]), sum(earlier.get(i, ())) + trajectory[i]
            t = float(finished[i])
            if r.completed:
                t = self._scorings(r, r.prompt, t, answers[i])
            r.duration = t + 0.01
        return turns, tools

    def _compact(self, owner, k, env, prompt, context) -> tuple[np.ndarray, ...]:
        """Context compaction: a later turn whose history would exceed its environment's ``compact_above`` reads
        the task prompt and a summary of ``compact_summary_tokens`` instead, and starts a new training sample.
        Per turn: the tokens removed so far (this turn's included), a compaction's history before and after it
        (on the turn after it; 0 elsewhere) and the training sample the turn belongs to. A rollout's turns are
        contiguous rows in turn order, and only rollouts whose history grows past the limit are walked."""
        T, envs = len(owner), self.c.environments
        cut, before, after, sample = (np.zeros(T, dtype=np.int64) for _ in range(4))
        above = np.asarray([e.compact_above for e in envs], dtype=np.int64)[env]
        if self.c.levers.no_compaction or not above.any():
            return cut, before, after, sample
        kept = prompt + np.asarray([e.compact_summary_tokens for e in envs], dtype=np.int64)[env]
        for r in np.unique(owner[(above > 0) & (context > above)]).tolist():
            removed = made = 0
            for j in range(np.searchsorted(owner, r), np.searchsorted(owner, r, "right")):
                current = int(context[j]) - removed
                if k[j] > 0 and current > above[j] and current > kept[j]:
                    before[j], after[j] = current, kept[j]
                    removed += current - int(kept[j])
                    made += 1
                cut[j], sample[j] = removed, made
        return cut, before, after, sample

    def _cached(
        self, draws, continuity, k, env, member, prompt, context, compacted
    ) -> tuple[np.ndarray, ...]:
        """Prefix-cache reuse, and why it fell short. First turns: members after a group's first find its task
        prompt with ``group_prompt_hit_rate`` (``levers.share_prompt``: always). Later turns: the history is found
        with ``prefix_cache_hit_rate``, up to its exact prefix, which the environment's ``retokenize_rate`` of
        turns (rendered differently) ends at a random point; a miss was sent to another server
        (``server_change_share``: none of it there) or finds part of it (evicted). A compacted history is the
        prompt and a summary, of which only the prompt is the previous turn's prefix. Returns per turn the
        cached tokens (block-aligned), the exact prefix (0 on first turns) and the break the harness records
        (a code into ``TurnColumns.BREAKS``; a retokenized turn records none: its short prefix says it)."""
        c, T = self.c, len(k)
        block = c.cache_block_tokens
        u, part = draws.random(T), draws.random(T)
        retokenize, point, moved = continuity.random(T), continuity.random(T), continuity.random(T)
        group_rate = c.prefix_cache_hit_rate if c.group_prompt_hit_rate is None else c.group_prompt_hit_rate
        first = np.where((member > 0) & ((u < group_rate) | c.levers.share_prompt), prompt, 0)
        hit = (
            u < c.prefix_cache_hit_rate
        ) | c.levers.prefix_continuity  # the lever: the same draws, all found
        rates = np.asarray([e.retokenize_rate for e in c.environments])[env]
        retokenized = hit & (retokenize < rates) & (not c.levers.prefix_continuity)
        prefix = np.where(retokenized, prompt + ((context - prompt) * point).astype(np.int64), context)
        prefix = np.where(compacted, prompt, prefix)
        moved = ~hit & (moved < c.server_change_share)
        partial = (context * part * 0.5).astype(np.int64) if c.prefix_cache_hit_rate > 0 else 0 * context
        kept = np.minimum(np.where(hit, prefix, np.where(moved, 0, partial)), prefix)
        breaks = np.where(compacted, 3, np.where(hit, 0, np.where(moved, 2, 1)))
        later = k > 0
        cached = (np.where(later, kept, first) // block) * block
        return cached, np.where(later, prefix, 0), np.where(later, breaks, 0)

    def _speculate(self, draws, rollouts: list[Rollout], owner, context, output) -> dict[str, np.ndarray]:
        """Acceptance falls with versions since the drafter was built and grows with length (suffix drafting);
        zeros where the environment does not draft (or speculative decoding is off)."""
        c = self.c
        T = len(owner)
        noise, jitter = draws.standard_normal(T), draws.standard_normal(T)
        lp = self.logprob_versions
        per_rollout = np.asarray(
            [
                (
                    r.env.spec_k + _long_extra_k(c, r) if c.spec_decoding and r.env.spec_k > 0 else 0,
                    max(0, r.policy_version - r.drafter_policy_version),
                    r.env.spec_acceptance,
                    lp is not None and lp[0] <= r.policy_version < lp[1],
                )
                for r in rollouts
            ],
            dtype=float,
        ).reshape(-1, 4)[owner]
        k = per_rollout[:, 0].astype(np.int64)
        on = k > 0
        length = np.minimum(1.0, (context + output / 2) / 16384)
        alpha = (
            per_rollout[:, 2]
            * (1 + c.spec_length_gain * length)
            * np.exp(-c.spec_version_decay * per_rollout[:, 1])
        )
        alpha = np.clip(alpha + 0.02 * noise, 0.05, 0.95)
        per_step = 1 + alpha * (1 - alpha**k) / (1 - alpha)
        steps = np.maximum(1, np.rint(output / per_step * (1 + 0.03 * jitter))).astype(np.int64)
        steps = np.maximum(np.minimum(steps, output), -(-output // (k + 1)))
        steps = np.where(on, steps, 0)
        return {
            "spec_k": k,
            "verify_steps": steps,
            "accepted_tokens": np.where(on, output - steps, 0),
            "draft_tokens": steps * k,
            "drafter": on & (per_rollout[:, 3] > 0),
        }

    def _scorings(self, r: Rollout, prompt: int, t: float, answer: int) -> float:
        c, env, rng = self.c, r.env, r.rng
        start = t + 0.05
        if env.kind == "judged":
            judge = self._judge(r, prompt, start, answer)
            r.scorings.append(judge)
            t = judge.end
        else:
            seconds = lognormal(rng, env.reward_seconds, 0.4) * self._scoring_slowdown(r)
            reward = Scoring(
                "reward",
                start,
                start + seconds,
                r.sandbox,
                reward=r.reward,
                error=None if r.scored else "verifier_error",
            )
            r.scorings.append(reward)
            t = reward.end
        t = self._components(r, t)
        if c.teacher.count > 0:
            seconds = r.trajectory_tokens / c.teacher_tokens_per_s + 0.2
            teacher = Scoring(
                "teacher", t + 0.05, t + 0.05 + seconds, r.index % c.teacher.count, tokens=r.trajectory_tokens
            )
            r.scorings.append(teacher)
            t = teacher.end
        return t

    def _components(self, r: Rollout, t: float) -> float:
        """The rollout's extra scoring components (``reward_components``), verifier calls one after the other
        on its sandbox host after its main scoring; returns when the last ends."""
        if not r.scored or r.reward is None:
            return t
        success = r.reward >= 0.5  # the success threshold (docs/semconv.md)
        for name, score in training.components(self.c, r.env.name, r.step, r.rollout_id, success):
            r.scorings.append(Scoring("reward", t + 0.02, t + 0.07, r.sandbox, reward=score, name=name))
            t += 0.07
        return t

    def _judge(self, r: Rollout, prompt: int, start: float, answer: int) -> Scoring:
        c, rng = self.c, r.rng
        input_tokens = c.judge_prompt_tokens + prompt + answer
        output = tokens(rng, c.judge_output_tokens, 0.4, 8, 4096)
        instance = r.index % c.judge.count
        queue = rng.expovariate(1.0 / c.queue_seconds)
        prefill = input_tokens / c.prefill_tokens_per_s
        if not r.scored:
            partial = min(output - 1, int((c.judge_timeout_s - queue - prefill) * c.judge_tokens_per_s * 0.5))
            return Scoring(
                "judge",
                start,
                start + c.judge_timeout_s,
                instance,
                input_tokens=input_tokens,
                output_tokens=max(0, partial),
                status="timeout",
                error="timeout",
            )
        seconds = queue + prefill + output / c.judge_tokens_per_s
        seconds = min(seconds * self._scoring_slowdown(r), c.judge_timeout_s - 0.5)
        return Scoring(
            "judge",
            start,
            start + seconds,
            instance,
            reward=r.reward,
            input_tokens=input_tokens,
            output_tokens=output,
            status="ok",
        )

    # --- the clock ------------------------------------------------------------------------------------------

    def _place(self, rng, groups: list[Group], s: int) -> float:
        """Dispatch each group inside its version's window so that it completes in this step's collection."""
        c = self.c
        start_s = self.available[s]
        spread = (start_s - self.ready_prev) if s > c.first_step else c.warmup_period_s
        completions = []
        for g in groups:
            lo = self.available[s - g.lag]
            hi = self.available.get(s - g.lag + 1, math.inf)
            scale = min(1.5, (hi - lo) / 4)  # a group's members start within a second or so of each other
            jitters = [g.rollouts[0].rng.random() * scale for _ in g.rollouts]
            span = max(j + r.duration for j, r in zip(jitters, g.rollouts, strict=True))
            target = self.ready_prev + 0.05 + rng.random() ** 0.6 * max(1.0, spread) * (1 + c.starvation)
            dispatch, gap, last = target - span, 0.0, hi - scale
            if dispatch < lo:
                dispatch = lo + 0.5 * rng.random() * scale
            elif dispatch >= last:  # too short to be this stale: it waited for a slot before its first turn
                dispatch = max(lo, last - min(5.0, last - lo) * rng.random() - 0.001)
                gap = target - span - dispatch
            for j, r in zip(jitters, g.rollouts, strict=True):
                _shift(r, dispatch + j, gap)
            completions.append(max(r.end for r in g.rollouts))
        return max(start_s, max(completions) + 0.05)

    def _train(
        self, rng, s: int, index: int, rollouts: list[Rollout], ready: float, excursion: bool
    ) -> StepPlan:
        c = self.c
        used = 0
        train_tokens = 0
        for r in rollouts:
            r.decision = _decision(r, c.staleness_bound)
            if r.decision == "used":
                used += max(
                    1, len(r.sample_tokens)
                )  # the training samples: several where compaction made them
                train_tokens += r.trajectory_tokens
        flops = 6 * c.trainer.model_parameters * train_tokens
        compute = c.step_overhead_s + flops / (c.trainer.devices * c.device_peak_flops * c.trainer_mfu)
        compute *= lognormal(rng, 1.0, 0.05)
        end = ready + compute
        sync_end = end + c.weight_sync_s * lognormal(rng, 1.0, 0.2) * self._sync_slowdown(s)
        self.available[s + 1] = sync_end
        step = StepPlan(
            s, index, self.available[s], ready, end, sync_end, used, train_tokens, rollouts, excursion
        )
        self.ready_prev = ready
        return step

    def _mismatch(self, s: int, rollouts: list[Rollout]) -> None:
        """The train-inference mismatch the trainer measures on each used sample (none when mismatch_kl = 0):
        a KL per token around mismatch_kl, larger by the factor during the mismatch excursion."""
        c = self.c
        if c.mismatch_kl <= 0:
            return
        window = self.mismatch_steps
        scale = c.mismatch_excursion_factor if window is not None and window[0] <= s < window[1] else 1.0
        scale *= training.mismatch_factor(c, s)
        for r in rollouts:
            if r.decision != "used":
                continue
            rng = rng_for(c.seed, "mismatch", r.rollout_id)
            kl = round(c.mismatch_kl * scale * lognormal(rng, 1.0, 0.3), 7)
            diff = round(math.sqrt(2 * kl), 6)
            r.mismatch = (kl, diff, round(diff * rng.uniform(4.0, 12.0), 6), round(math.exp(kl), 7))

    # --- is it stuck: a silent worker, a scoring stall, weight-sync bubbles (off by default) ---------------

    def _scoring_slowdown(self, r: Rollout) -> float:
        window = self._position_range(self.c.scoring_stall)
        return self.c.scoring_stall_factor if window and window[0] <= r.step < window[1] else 1.0

    def _sync_slowdown(self, s: int) -> float:
        window = self._position_range(self.c.weight_sync_bubbles)
        return self.c.weight_sync_bubble_factor if window and window[0] <= s < window[1] else 1.0

    def silent_window(self) -> tuple[int, float, float] | None:
        """(server, from, to) seconds of the silent worker, once the step it starts at is planned."""
        w = self.c.silent_worker
        start = self.available.get(self._position(float(w["at"]))) if w else None
        return None if start is None else (int(w["server"]), start, start + float(w["seconds"]))

    def _silence(self, plan: StepPlan, groups: list[Group]) -> None:
        """Rollout server k goes silent for a while: a rollout it was running hangs (its first turn is
        written, then nothing) until the worker comes back and aborts it; groups that would have run on it
        meanwhile run on the next server."""
        window = self.silent_window()
        if window is None:
            return
        k, lo, hi = window
        for g in groups:
            if g.rollouts[0].server == k and any(r.start < hi and r.end > lo for r in g.rollouts):
                for r in g.rollouts:
                    r.server = (k + 1) % self.c.rollout.count
        if plan.step == self._position(float(self.c.silent_worker["at"])):
            plan.hung_started.append(self._hung(k, lo, hi, plan.step))
            self.hung = plan.hung_started[0]
        hung = getattr(self, "hung", None)
        last = plan.index + 1 >= self.c.steps
        if hung is not None and hung.decision != "reported" and (plan.sync_end >= hi or last):
            hung.decision = "reported"
            hung.end = min(hung.end, plan.sync_end)  # a run that ends first aborts it then
            plan.hung_ended.append(hung)

    def _hung(self, k: int, lo: float, hi: float, version: int) -> Rollout:
        env = self.c.environments[0]
        r = Rollout(f"hung-{k}", None, f"{env.name}/hung", env, 0, rng_for(self.c.seed, "hung"), server=k)
        r.status, r.scored, r.policy_version, r.step = ROLLOUT_ABORTED, False, version, -1
        turn = Turn(0, lo - 30.0, lo, env.prompt_tokens, 0, 900, 0, 0.1, 29.9, 0.1)
        r.turn_columns, r.turn_rows = TurnColumns.of([turn]), (0, 1)
        r.start, r.end, r.duration = lo - 30.0, hi, hi - lo + 30.0
        return r


def _long_extra_k(c: SimConfig, r: Rollout) -> int:
    """levers.spec_long_extra_k: more speculative budget for rollouts planned to decode many tokens."""
    extra = c.levers.spec_long_extra_k
    return extra if extra and r.planned_output >= c.levers.spec_long_tokens else 0


def _weight(g: Group) -> int:
    """A group's weight in the freshness rate: its signal-carrying rollouts (else all of them)."""
    return sum(r.signal for r in g.rollouts) or len(g.rollouts)


def _estimate(r: Rollout, c: SimConfig) -> float:
    """Rough duration of a rollout before it is generated: decode plus tool time."""
    return r.planned_output / c.decode_tokens_per_s + r.planned_tool_s


def _shift(r: Rollout, dispatch: float, gap: float) -> None:
    """Place a rollout generated from t = 0: it is dispatched, waits `gap`, then runs its turns (its turn
    and tool rows move by ``r.offset`` with the rest of the step's, in ``plan_step``)."""
    offset = dispatch + gap
    for item in r.scorings:
        item.start += offset
        item.end += offset
    r.offset = offset
    r.start, r.end = dispatch, offset + r.duration


def _decision(r: Rollout, bound: int) -> str:
    if not r.completed:
        return "invalid"
    if not r.scored:
        return "unscored"
    if not r.signal:
        return "zero_signal"
    if r.staleness > bound:
        return "stale"
    return "used"


def _successes_not_all_equal(rng, n: int, p: float) -> int:
    """Successes among n given that 1 ≤ k ≤ n − 1 (binomial, conditioned)."""
    weights = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(1, n)]
    if sum(weights) <= 0:
        return rng.randint(1, n - 1)
    return 1 + weighted_index(rng, weights)


class _Shape:
    """The step's planned turns (per rollout: how many; per turn: output tokens) and the tool call planned
    after each turn but the last (which tool, observation tokens, exit code, seconds), before any fails."""

    __slots__ = (
        "turns",
        "owner",
        "outputs",
        "calls",
        "call_owner",
        "tool",
        "exit_code",
        "observation",
        "seconds",
    )

    def __init__(self, turns, owner, outputs, calls, call_owner, tool, exit_code, observation, seconds):
        self.turns, self.owner, self.outputs = turns, owner, outputs
        self.calls, self.call_owner, self.tool = calls, call_owner, tool
        self.exit_code, self.observation, self.seconds = exit_code, observation, seconds


class _ToolTable:
    """Every environment's tools in one table, so a step's calls are chosen with one draw per call."""

    def __init__(self, environments: list[Environment]):
        tools = [(i, t) for i, e in enumerate(environments) for t in e.tools]
        self.names = [t.name for _, t in tools]
        self.fail_exit_rate = np.asarray([t.fail_exit_rate for _, t in tools], dtype=float)
        self.observation_tokens = np.asarray([t.observation_tokens for _, t in tools], dtype=float)
        self.seconds = np.asarray([t.seconds for _, t in tools], dtype=float)
        self.count = np.asarray([len(e.tools) for e in environments], dtype=np.int64)
        self.first = np.concatenate(([0], np.cumsum(self.count)[:-1])).astype(np.int64)
        self.cumulative = [np.cumsum([t.weight for t in e.tools]) for e in environments]

    def choose(self, draws: np.random.Generator, env: np.ndarray) -> np.ndarray:
        """A tool for each call, by its environment's weights."""
        u = draws.random(len(env))
        out = np.zeros(len(env), dtype=np.int64)
        for e, cumulative in enumerate(self.cumulative):
            mine = env == e
            if len(cumulative) and mine.any():
                pick = np.searchsorted(cumulative, u[mine] * cumulative[-1], side="right")
                out[mine] = self.first[e] + np.minimum(pick, len(cumulative) - 1)
        return out


def _samples_before(owner: np.ndarray, before: np.ndarray) -> dict[int, list[int]]:
    """Per rollout that compacted, the tokens of each training sample before its last: a sample ends where a
    compaction starts the next, holding the history the compacted turn would have read (``before``)."""
    out: dict[int, list[int]] = {}
    for j in np.flatnonzero(before > 0).tolist():
        out.setdefault(int(owner[j]), []).append(int(before[j]))
    return out


def _position(owner: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each row's position among its rollout's rows (rows grouped by rollout, ``counts`` per rollout)."""
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return np.arange(len(owner)) - first[owner]
