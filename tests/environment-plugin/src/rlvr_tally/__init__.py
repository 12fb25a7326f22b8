"""A third-party environment plugin: the policy reaches a row's target number by adding to a running total."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from rlvr_plugins import Environment, Plugin, RewardFunction, hookimpl


class Tally:
    """One episode: a running total that starts at 0; the row's ``target`` is the number to reach."""

    def __init__(self, max_number: int):
        self.max_number = max_number
        self.total, self.calls, self.target = 0, 0, None

    def reset(self, **row) -> str:
        self.total, self.calls, self.target = 0, 0, int(row["target"])
        return f"Reach {self.target} by adding numbers to a total that starts at 0."

    def add(self, number: int) -> str:
        """Add a number to the running total.

        Args:
            number: The number to add.

        Returns:
            The new total.
        """
        if not isinstance(number, int) or abs(number) > self.max_number:
            raise ValueError(f"number must be an integer between -{self.max_number} and {self.max_number}")
        self.calls += 1
        self.total += number
        return str(self.total)

    def get_reward(self) -> float:
        return float(self.total == self.target)


def tally_calls(*, prompt, completion, example, environment):
    return float(environment.calls)


class TallyPlugin(Plugin):
    name = "tally"
    description = "environment 'tally': an add(number) tool; reward 1 when the total reaches the row's target"

    @dataclass(frozen=True)
    class Options:
        max_number: int = 1000

    @hookimpl
    def rlvr_environments(self, register):
        register(Environment("tally", partial(Tally, self.options.max_number), self.description))

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction("tally-calls", tally_calls, isolated=False))
