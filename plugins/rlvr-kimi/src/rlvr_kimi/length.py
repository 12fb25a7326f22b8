"""Kimi k1.5's length reward (Kimi Team 2025, §2.3.3), as pure functions on tensors."""

from __future__ import annotations

import torch


def kimi_length_reward(lengths: torch.Tensor, correct: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Kimi k1.5's length reward, computed within each prompt group.

    For the ``G`` responses to one prompt, with ``len_i`` the length of response ``i`` and
    ``min_len`` / ``max_len`` the shortest and longest of **that group**::

        lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)
        reward_i = lambda_i           if response i is correct
                   min(0, lambda_i)   otherwise

    and every ``reward_i = 0`` in a group where ``max_len == min_len``. The shortest response
    gets ``+0.5``, the longest ``-0.5``; a wrong answer is never rewarded for being short.

    :param lengths: ``(N,)`` long, completion lengths in tokens, ``N = num_groups * G`` with the
        ``G`` responses of one prompt contiguous (group ``g`` is rows ``g*G … g*G+G-1``).
    :param correct: ``(N,)`` bool, True where the response is correct.
    :param num_generations: ``G``.
    :returns: ``(N,)`` float32, in ``[-0.5, 0.5]``.

    >>> kimi_length_reward(torch.tensor([10, 20, 30, 50]), torch.tensor([True, False, True, False]), 4).tolist()
    [0.5, 0.0, 0.0, -0.5]
    """
    if lengths.shape != correct.shape or lengths.dim() != 1:
        raise ValueError(f"lengths {tuple(lengths.shape)} and correct {tuple(correct.shape)} must both be (N,)")
    if num_generations < 1 or lengths.numel() % num_generations:
        raise ValueError(f"{lengths.numel()} lengths cannot be split into groups of num_generations={num_generations}")
    groups = lengths.to(torch.float64).view(-1, num_generations)
    min_len = groups.min(dim=1, keepdim=True).values
    span = groups.max(dim=1, keepdim=True).values - min_len
    lam = torch.where(
        span > 0, 0.5 - (groups - min_len) / span.masked_fill(span == 0, 1.0), torch.zeros_like(groups)
    ).view(-1)
    reward = torch.where(correct.to(torch.bool), lam, lam.clamp(max=0.0))
    return reward.to(torch.float32)


def is_correct(values: torch.Tensor, threshold: float) -> torch.Tensor:
    """``values >= threshold`` elementwise; a NaN value (not scored) is not correct.

    :param values: ``(N,)`` float, one reward function's raw values.
    :returns: ``(N,)`` bool.

    >>> is_correct(torch.tensor([1.0, 0.0, float("nan"), 2.0]), 1.0).tolist()
    [True, False, False, True]
    """
    return (values >= threshold) & ~torch.isnan(values)
