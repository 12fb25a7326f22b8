"""Built-in reward ``repetition``: the n-gram repetition penalty (as open-r1 and TRL ship it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import hookimpl
from ..plugin import Plugin, RewardFunction


def repeated_ngram_share(text: str, n: int) -> float:
    """The share of the text's word ``n``-grams that repeat an earlier one: ``1 − unique / total``.

    Words are the whitespace-separated tokens of ``text.lower()``; a text of fewer than ``n``
    words has no ``n``-gram and scores 0.

    >>> repeated_ngram_share("a b c a b c", 3)   # 4 trigrams, 3 unique
    0.25
    >>> repeated_ngram_share("a b", 3)
    0.0
    """
    words = text.lower().split()
    total = len(words) - n + 1
    if total <= 0:
        return 0.0
    unique = len({tuple(words[i : i + n]) for i in range(total)})
    return 1.0 - unique / total


class RepetitionScorer:
    """``max_penalty · repeated_ngram_share(completion, n)``: 0 without repeats, ``max_penalty`` at the limit.

    A module-level class, so the reward engine can ship it to its workers.
    """

    def __init__(self, ngram_size: int, max_penalty: float):
        self.ngram_size, self.max_penalty = ngram_size, max_penalty

    def __call__(self, *, prompt, completion, example) -> float:
        return self.max_penalty * repeated_ngram_share(completion, self.ngram_size)


class RepetitionPenalty(Plugin):
    """The n-gram repetition penalty of open-r1 (``repetition_penalty``) and TRL, as a reward.

    ``R = max_penalty · (1 − unique / total)`` over the completion's word ``ngram_size``-grams
    (:func:`repeated_ngram_share`): 0 for a completion that repeats no ``n``-gram, approaching
    ``max_penalty`` (≤ 0) for one that repeats a phrase over and over. A reward, not a length
    penalty: it is a function of the text, not of its length (a long completion without repeats
    scores 0), and it needs nothing from another reward. As a reward it reaches the estimator,
    normalised with the others. ``weight`` scales it like any reward (a schedule allowed).
    """

    name = "repetition"
    description = "n-gram repetition penalty: max_penalty * (1 - unique n-grams / n-grams), open-r1/TRL"

    @dataclass
    class Options:
        ngram_size: int = 3
        max_penalty: float = -1.0
        weight: float = 1.0

        def __post_init__(self):
            if self.ngram_size < 1:
                raise ValueError(f"option 'ngram_size' must be >= 1, got {self.ngram_size!r}")
            if not math.isfinite(self.max_penalty) or self.max_penalty > 0:
                raise ValueError(f"option 'max_penalty' must be a finite number <= 0, got {self.max_penalty!r}")
            if not math.isfinite(self.weight):
                raise ValueError(f"option 'weight' must be finite, got {self.weight!r}")

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        register(
            RewardFunction(
                self.name,
                RepetitionScorer(o.ngram_size, o.max_penalty),
                o.weight,
                isolated=False,
                example={"prompt": "1+1=", "completion": "two two two two", "example": {}},
            )
        )
