"""TRL's sample decisions (``unscored``, ``zero_signal``, ``used``), recomputed in numpy from a round's
rewards.

The arithmetic of TRL's ``GRPOTrainer`` (its group mean and Bessel-corrected std ignoring NaN, and its
zero-std test), spelt out in numpy ufuncs because a round's rewards are a few dozen numbers, for which each
torch call costs more than the arithmetic. Separate from the span building (``trl_spans``) because it is TRL's
arithmetic, held equal to TRL's own by ``tests/test_trl.py``, not what a span carries.
"""

from __future__ import annotations

import numpy as np


def _decisions(trainer, rewards_per_func, weights, unscorable) -> list[str]:
    """TRL's own tests, on the gathered rewards: every function None → unscored; zero std → zero_signal.

    The arithmetic of ``GRPOTrainer._generate_and_score_completions`` and ``trl.trainer.utils.nanstd`` (mean,
    Bessel-corrected std ignoring NaN, ``torch.isclose(std, 0)``), in float32 as TRL computes it, on numpy:
    a round's rewards are a few dozen numbers, for which each torch call costs more than the arithmetic (the
    torch version took ~0.6 ms of CPU a round beside training, numpy's nan-functions ~0.1 ms, their arithmetic
    spelt out in ufuncs ~25 µs)."""
    n_funcs = rewards_per_func.shape[1]
    generations = int(trainer.num_generations)
    aggregation = getattr(trainer, "multi_objective_aggregation", "sum_then_normalize")
    scale = getattr(trainer, "scale_rewards", "group")
    with np.errstate(invalid="ignore", divide="ignore"):  # the mean of an all-NaN group is NaN, as in torch
        if aggregation == "normalize_then_sum":
            grouped = rewards_per_func.reshape(-1, generations, n_funcs)
            mean_k = _nanmean(grouped, axis=1)[0]
            std_k = _nanstd(grouped, axis=1) if generations > 1 else np.zeros_like(mean_k)
            normalized = ((grouped - mean_k) / (std_k + np.float32(1e-4))).reshape(-1, n_funcs)
            rewards = _nansum(normalized * weights[None, :], axis=1)
            rewards[unscorable] = np.nan
            std = (
                np.broadcast_to(_nanstd(rewards), rewards.shape)
                if rewards.size > 1
                else np.zeros_like(rewards)
            )
        else:
            rewards = _nansum(rewards_per_func * weights[None, :], axis=1)
            rewards[unscorable] = np.nan
            if scale == "batch":
                std = (
                    np.broadcast_to(_nanstd(rewards), rewards.shape)
                    if rewards.size > 1
                    else np.zeros_like(rewards)
                )
            elif generations > 1:
                std = np.repeat(_nanstd(rewards.reshape(-1, generations), axis=1).ravel(), generations)
            else:
                std = np.zeros_like(rewards)
    # torch.isclose(std, 0) with its defaults (rtol 1e-5, atol 1e-8) is |std| <= 1e-8, NaN never close; spelt
    # out, as np.isclose computes it (in float64): np.isclose itself costs ~40 us on a few numbers.
    zero = (np.abs(np.asarray(std, dtype=np.float64)) <= 1e-8).tolist()
    return [
        "unscored" if u else "zero_signal" if z else "used"
        for u, z in zip(unscorable.tolist(), zero, strict=True)
    ]


def _nanstd(values, axis=None):
    """``trl.trainer.utils.nanstd`` in numpy (keepdims): Bessel-corrected, NaN ignored, NaN below 2 values."""
    nan = np.isnan(values)
    mean, count = _nanmean(values, axis, nan)
    variance = _nanmean((values - mean) ** 2, axis, nan)[0]  # NaN where ``values`` is: the same mask
    correction = np.where(count > 1, count / np.maximum(count - 1, 1), np.nan).astype(values.dtype)
    return np.sqrt(variance * correction)


def _nanmean(values, axis=None, nan=None):
    """``np.nanmean(values, axis, keepdims=True)`` and the count of values it averaged: its arithmetic (a sum
    in the values' type, divided by the count in float64 and rounded back), without its layers of Python."""
    nan = np.isnan(values) if nan is None else nan
    total = np.add.reduce(np.where(nan, values.dtype.type(0), values), axis=axis, keepdims=True)
    count = np.add.reduce(~nan, axis=axis, keepdims=True, dtype=np.intp)
    return np.true_divide(total, count, out=total, casting="unsafe"), count


def _nansum(values, axis):
    """``np.nansum``: NaN counted as 0, summed in the values' type."""
    return np.add.reduce(np.where(np.isnan(values), values.dtype.type(0), values), axis=axis)
