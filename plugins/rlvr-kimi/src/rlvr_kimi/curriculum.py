"""Kimi k1.5's sampling strategies (Kimi Team 2025, §2.3.4), as pure functions.

*Curriculum sampling*: train on easy prompts first and widen the admitted difficulty on
a schedule. *Prioritised sampling*: track each prompt's success rate ``s_i`` and draw
prompts with probability proportional to ``1 - s_i`` (here with a floor, so a solved
prompt is still drawn now and then).

Shapes: ``n`` is the number of prompts in the train set; ``N = P * G`` the number of
completions of a scored batch of ``P`` prompts with ``G`` completions each, the ``G``
completions of one prompt contiguous.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .schedules import SCHEDULES


def admitted_fraction(
    step: int, *, schedule: str = "linear", start_quantile: float = 0.25, full_at_step: int = 100, num_stages: int = 4
) -> float:
    """The fraction ``q(t)`` of prompts, easiest first, admitted at optimizer step ``t``.

    With ``q0 = start_quantile``, ``T = full_at_step``, ``K = num_stages`` and
    ``r = min(1, t / T)`` (``r = 1`` when ``T = 0``)::

        linear:  q(t) = q0 + (1 - q0) * r
        step:    q(t) = q0 + (1 - q0) * floor(K * r) / K
        none:    q(t) = 1

    >>> admitted_fraction(50, schedule="linear", start_quantile=0.5, full_at_step=100)
    0.75
    >>> admitted_fraction(60, schedule="step", start_quantile=0.5, full_at_step=100, num_stages=4)
    0.75
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"Unsupported schedule: {schedule!r}. Supported: {list(SCHEDULES)}")
    if schedule == "none":
        return 1.0
    r = 1.0 if full_at_step <= 0 else min(1.0, max(0, step) / full_at_step)
    if schedule == "step":
        r = math.floor(num_stages * r) / num_stages
    return start_quantile + (1.0 - start_quantile) * r


def admitted_difficulty(difficulties: torch.Tensor, step: int, *, min_count: int = 1, **schedule: Any) -> float:
    """The highest admitted difficulty ``d_max(t)`` at optimizer step ``t``.

    With ``d_(1) <= … <= d_(n)`` the sorted difficulties and ``q(t)`` from
    :func:`admitted_fraction`::

        k(t)     = min(n, max(min_count, ceil(q(t) * n)))
        d_max(t) = d_(k(t))

    ``min_count`` (the number of distinct prompts one batch needs) keeps enough prompts
    admitted.

    :param difficulties: ``(n,)`` float, one difficulty per prompt (higher is harder).
    :param schedule: the keyword arguments of :func:`admitted_fraction`.

    >>> admitted_difficulty(torch.tensor([3.0, 1.0, 2.0, 4.0]), 0, schedule="linear", start_quantile=0.5)
    2.0
    """
    n = difficulties.numel()
    if n == 0:
        raise ValueError("no prompts: the difficulty list is empty")
    q = admitted_fraction(step, **schedule)
    k = min(n, max(min_count, math.ceil(q * n - 1e-9)))
    return float(torch.sort(difficulties.to(torch.float64)).values[k - 1])


def admitted(difficulties: torch.Tensor, step: int, *, min_count: int = 1, **schedule: Any) -> torch.Tensor:
    """Indices of the prompts admitted at step ``t``: every ``i`` with ``d_i <= d_max(t)``.

    Ties at ``d_max(t)`` are all admitted, so more than ``k(t)`` prompts may be admitted
    (with integer difficulty levels the curriculum admits whole levels).

    :param difficulties: ``(n,)`` float.
    :returns: ``(m,)`` long, ascending.

    >>> admitted(torch.tensor([3.0, 1.0, 2.0, 2.0]), 0, schedule="linear", start_quantile=0.5).tolist()
    [1, 2, 3]
    """
    d_max = admitted_difficulty(difficulties, step, min_count=min_count, **schedule)
    return torch.nonzero(difficulties.to(torch.float64) <= d_max).flatten()


def success_rates(
    successes: torch.Tensor, attempts: torch.Tensor, *, prior_success: float = 0.5, prior_strength: float = 2.0
) -> torch.Tensor:
    """Each prompt's success rate with a Beta prior of mean ``p0`` and ``m`` pseudo-attempts::

        s_i = (successes_i + m * p0) / (attempts_i + m)

    A prompt never attempted has ``s_i = p0`` (also when ``m = 0``).

    :param successes: ``(n,)`` int, correct completions of prompt ``i`` so far.
    :param attempts: ``(n,)`` int, scored completions of prompt ``i`` so far.
    :returns: ``(n,)`` float64 in ``[0, 1]``.

    >>> success_rates(torch.tensor([0, 3, 4]), torch.tensor([0, 4, 4]), prior_success=0.5, prior_strength=2).tolist()
    [0.5, 0.6666666666666666, 0.8333333333333334]
    """
    s = successes.to(torch.float64)
    a = attempts.to(torch.float64)
    denom = a + prior_strength
    rate = (s + prior_strength * prior_success) / denom.masked_fill(denom == 0, 1.0)
    return torch.where(denom == 0, torch.full_like(rate, prior_success), rate)


def sampling_weights(
    successes: torch.Tensor,
    attempts: torch.Tensor,
    *,
    floor: float = 0.05,
    prior_success: float = 0.5,
    prior_strength: float = 2.0,
) -> torch.Tensor:
    """Kimi k1.5's prioritised sampling weight ``w_i = max(1 - s_i, floor)``.

    ``s_i`` is :func:`success_rates`; a prompt is drawn with probability ``w_i / sum_j w_j``
    (among the admitted prompts). The floor keeps solved prompts (``s_i = 1``) in play at
    ``floor`` times the rate of a never-solved one.

    :returns: ``(n,)`` float64, ``> 0`` when ``floor > 0``.

    >>> sampling_weights(torch.tensor([0, 4, 0]), torch.tensor([4, 4, 0]), floor=0.05, prior_strength=0).tolist()
    [1.0, 0.05, 0.5]
    """
    rate = success_rates(successes, attempts, prior_success=prior_success, prior_strength=prior_strength)
    return (1.0 - rate).clamp(min=floor)


def group_outcomes(correct: torch.Tensor, counted: torch.Tensor, num_generations: int):
    """Successes and attempts of each prompt group of a scored batch.

    :param correct: ``(N,)`` bool, True where the completion is correct.
    :param counted: ``(N,)`` bool, True where the completion counts as an attempt (scored).
    :returns: ``(successes (P,), attempts (P,))``, long, ``P = N / G``.

    >>> [t.tolist() for t in group_outcomes(torch.tensor([1, 0, 1, 1], dtype=torch.bool),
    ...                                      torch.tensor([1, 1, 0, 1], dtype=torch.bool), 2)]
    [[1, 1], [2, 1]]
    """
    if correct.shape != counted.shape or correct.dim() != 1 or correct.numel() % num_generations:
        raise ValueError(
            f"correct {tuple(correct.shape)} and counted {tuple(counted.shape)} must both be (N,) "
            f"with N a multiple of num_generations={num_generations}"
        )
    c = counted.to(torch.bool).view(-1, num_generations)
    ok = correct.to(torch.bool).view(-1, num_generations) & c
    return ok.sum(dim=1).long(), c.sum(dim=1).long()


def success_histogram(rates: torch.Tensor, bins: int = 5) -> dict[str, float]:
    """Share of ``rates`` in each of ``bins`` equal bins of ``[0, 1]`` (the last bin includes 1).

    Keys are ``"0.0-0.2"``, ``"0.2-0.4"`` … (for 5 bins); values sum to 1 (all 0 when empty).

    >>> success_histogram(torch.tensor([0.0, 0.1, 0.5, 1.0]))
    {'0.0-0.2': 0.5, '0.2-0.4': 0.0, '0.4-0.6': 0.25, '0.6-0.8': 0.0, '0.8-1.0': 0.25}
    """
    which = (rates.to(torch.float64) * bins).floor().clamp(0, bins - 1).long()
    counts = torch.bincount(which, minlength=bins).tolist() if rates.numel() else [0] * bins
    total = max(1, rates.numel())
    return {f"{i / bins:.1f}-{(i + 1) / bins:.1f}": counts[i] / total for i in range(bins)}


def difficulties_from_column(
    values: Sequence[Any],
    *,
    column: str = "difficulty",
    labels: Mapping[str, float] | None = None,
    from_pass_rate: bool = False,
) -> list[float]:
    """Turn a dataset column into one float difficulty per prompt (higher is harder).

    * a number is used as is;
    * a string is looked up in ``labels`` (e.g. ``{"easy": 0, "medium": 1, "hard": 2}``);
    * with ``from_pass_rate``, the value is a pass rate ``p`` in ``[0, 1]`` and the
      difficulty is ``1 - p``.

    Errors name the column, the row and the accepted values.

    >>> difficulties_from_column(["easy", 3, "hard"], labels={"easy": 0.0, "hard": 2.0})
    [0.0, 3.0, 2.0]
    >>> difficulties_from_column([0.25, 1.0], from_pass_rate=True)
    [0.75, 0.0]
    """
    out = []
    for row, value in enumerate(values):
        if isinstance(value, str) and not from_pass_rate:
            if labels is None:
                raise ValueError(
                    f"column {column!r}, row {row}: label {value!r} is not a number; "
                    "set difficulty_labels to map labels to numbers"
                )
            if value not in labels:
                raise ValueError(
                    f"column {column!r}, row {row}: unknown label {value!r}; difficulty_labels has {sorted(labels)}"
                )
            out.append(float(labels[value]))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(
                f"column {column!r}, row {row}: difficulty must be a finite number"
                f"{'' if from_pass_rate else ' or a label'}, got {value!r}"
            )
        if from_pass_rate:
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"column {column!r}, row {row}: a pass rate must lie in [0, 1], got {value!r}")
            out.append(1.0 - float(value))
        else:
            out.append(float(value))
    return out
