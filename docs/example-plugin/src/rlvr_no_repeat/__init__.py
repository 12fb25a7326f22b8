"""An rlvr plugin that rewards completions for not repeating themselves."""

from dataclasses import dataclass

from rlvr_plugins import Plugin, RewardFunction, hookimpl


def repeated_share(text: str, n: int) -> float:
    """Share of the character n-grams of ``text`` that repeat an earlier one.

    >>> repeated_share("abcabc", 3)   # abc bca cab abc: one of four repeats
    0.25
    >>> repeated_share("ab", 3)
    0.0
    """
    grams = [text[i:i + n] for i in range(len(text) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


@dataclass(frozen=True)
class NoRepeatScorer:
    n: int

    def __call__(self, *, prompt, completion, example):
        return -repeated_share(completion, self.n)


class NoRepeatPlugin(Plugin):
    """Reward ``-(share of repeated character n-grams)``: 0 for no repetition, towards -1 for loops."""

    name = "no-repeat"
    description = "penalises repeated character n-grams in the completion"

    @dataclass
    class Options:
        n: int = 3
        weight: float = 0.5

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("no-repeat", NoRepeatScorer(self.options.n), weight=self.options.weight))
