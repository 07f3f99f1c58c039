"""Seeded randomness for the plan: derived seeds, stratified decisions, skewed sizes.

Every random choice comes from generators seeded from the run seed and the entity's name (``random.Random``
for group- and rollout-level decisions; one ``numpy`` generator per step for its turns, tool calls and ids,
drawn a column at a time), so a plan never depends on process scheduling. Yes/no decisions that feed the funnel (infra failure, scoring
failure, all-equal group, stale group) go through :class:`Stratified`: each item keeps its own probability,
yet the realized count over the run stays within one of the expected count, so a preset's nominal rates come
out as written instead of drifting with coin-flip noise.
"""

from __future__ import annotations

import hashlib
import math
import random

import numpy as np


def derive_seed(*parts: object) -> int:
    """A 64-bit seed from any parts: the same parts always give the same seed, on every machine."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def rng_for(*parts: object) -> random.Random:
    return random.Random(derive_seed(*parts))


class Stratified:
    """Systematic sampling with unequal probabilities, carried across calls.

    Item *i* is chosen when the running sum of probabilities crosses the next integer (offset by one random
    start): each item is chosen with exactly its probability, and after *n* items the number chosen is the
    sum of their probabilities rounded up or down. Callers shuffle each batch so no periodic pattern appears.
    """

    def __init__(self, rng: random.Random):
        self._rng = rng
        self._total = rng.random()

    def choose(self, probability: float) -> bool:
        before = self._total
        self._total += min(1.0, max(0.0, probability))
        return math.floor(self._total) > math.floor(before)


class Quota:
    """Yes/no decisions on weighted items (groups of rollouts), keeping the chosen weight near the expected.

    Error diffusion: an item is chosen when that brings the chosen weight closer to Σ probability × weight,
    so after any number of items the two differ by at most half an item's weight. Used where a rate is
    counted in rollouts but decided per group (all-equal groups, stale groups).
    """

    def __init__(self, rng: random.Random):
        self.expected = rng.random() - 0.5
        self.chosen = 0.0

    def choose(self, probability: float, weight: float = 1.0) -> bool:
        self.expected += min(1.0, max(0.0, probability)) * weight
        if self.chosen + weight / 2 <= self.expected:
            self.chosen += weight
            return True
        return False


def lognormal(rng: random.Random, mean: float, sigma: float) -> float:
    """A lognormal draw with the given mean: long right tail, as lengths and latencies have."""
    if mean <= 0:
        return 0.0
    return rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)


def tokens(rng: random.Random, mean: float, sigma: float, low: int = 1, high: int = 1 << 30) -> int:
    return max(low, min(high, int(round(lognormal(rng, mean, sigma)))))


def lognormal_array(draws: np.random.Generator, mean: np.ndarray, sigma) -> np.ndarray:
    """:func:`lognormal` for an array of means, one draw each from a numpy generator."""
    safe = np.where(mean > 0, mean, 1.0)
    values = draws.lognormal(np.log(safe) - np.square(sigma) / 2, sigma)
    return np.where(mean > 0, values, 0.0)


def tokens_array(draws: np.random.Generator, mean: np.ndarray, sigma, low, high) -> np.ndarray:
    """:func:`tokens` for an array of means."""
    return np.clip(np.rint(lognormal_array(draws, mean, sigma)), low, high).astype(np.int64)


def segment_exclusive_sum(values: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per row, the sum of the rows before it in its segment (rows grouped by ``owner``, in order): a
    rollout's history or clock before each of its turns."""
    if not len(values):
        return np.zeros(0, dtype=values.dtype)
    before = np.cumsum(values) - values
    head = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
    segment = np.cumsum(np.concatenate(([True], owner[1:] != owner[:-1]))) - 1
    return before - before[head][segment]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def weighted_index(rng: random.Random, weights: list[float]) -> int:
    return rng.choices(range(len(weights)), weights=weights)[0]


def allocate(shares: list[float], n: int, carry: list[float]) -> list[int]:
    """Split n items over shares with carried remainders, so each share's count stays near share × total."""
    total = sum(shares)
    wanted = [carry[i] + n * s / total for i, s in enumerate(shares)]
    counts = [math.floor(w) for w in wanted]
    left = n - sum(counts)
    order = sorted(range(len(shares)), key=lambda i: wanted[i] - counts[i], reverse=True)
    for i in order[:left]:
        counts[i] += 1
    for i in range(len(shares)):
        carry[i] = wanted[i] - counts[i]
    return counts
