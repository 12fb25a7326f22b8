"""The training alarm of reward gaming: the train reward rises while held-out accuracy falls.

A policy that learns to game its reward (a hack the reward credits) raises the train reward
without solving more problems, so the periodic evaluations on held-out rows stop following it
and fall. :func:`integrity_alarm` is that test over the last ``eval.integrity_window`` periodic
evaluations; :class:`IntegrityWatch` feeds it during ``rlvr train``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

ALARM_METRIC = "integrity/alarm"


def slope(values: Sequence[float]) -> float:
    """Least-squares slope of ``values`` against their index ``0 … n-1`` (0.0 for fewer than two).

    ``b = Σ (i − ī)(y_i − ȳ) / Σ (i − ī)²``

    >>> slope([1.0, 2.0, 3.0]), slope([3.0, 1.0]), slope([5.0])
    (1.0, -2.0, 0.0)
    """
    n = len(values)
    if n < 2:
        return 0.0
    mean_i, mean_y = (n - 1) / 2, sum(values) / n
    num = sum((i - mean_i) * (y - mean_y) for i, y in enumerate(values))
    den = sum((i - mean_i) ** 2 for i in range(n))
    return num / den


def integrity_alarm(train_rewards: Sequence[float], heldout: Sequence[float], window: int) -> bool:
    """Whether the train reward rose while held-out accuracy fell over the last ``window`` evaluations.

    ``train_rewards[j]``: the mean train reward logged between evaluation ``j − 1`` and evaluation
    ``j``; ``heldout[j]``: evaluation ``j``'s accuracy. Over the last ``window`` pairs, the alarm is
    raised when the train reward's least-squares slope is above 0 and its last value above its first,
    and held-out accuracy's slope is below 0 and its last value below its first. ``window < 2``
    (off), fewer than ``window`` evaluations, or a non-finite value in the window: no alarm.

    >>> integrity_alarm([0.2, 0.4, 0.6], [0.5, 0.4, 0.3], 3), integrity_alarm([0.2, 0.4, 0.6], [0.3, 0.4, 0.5], 3)
    (True, False)
    """
    if window < 2 or len(train_rewards) < window or len(heldout) < window:
        return False
    rewards, accuracy = list(train_rewards[-window:]), list(heldout[-window:])
    if not all(math.isfinite(v) for v in (*rewards, *accuracy)):
        return False
    rising = slope(rewards) > 0 and rewards[-1] > rewards[0]
    falling = slope(accuracy) < 0 and accuracy[-1] < accuracy[0]
    return rising and falling


@dataclass
class IntegrityWatch:
    """Feeds :func:`integrity_alarm` during training: each periodic evaluation's accuracy, and the mean train
    reward logged since the evaluation before it, up to and including the evaluation's own step (``window``
    evaluations; below 2 it never fires).

    TRL logs a step's reward after the callbacks' ``on_step_end``, where the evaluation runs, so an evaluation
    waits (``pending``) for the first train reward logged at its step or later, and is checked then.
    """

    window: int
    received: list[float] = field(default_factory=list)
    pending: tuple[int, float] | None = None
    rewards: list[float] = field(default_factory=list)
    heldout: list[float] = field(default_factory=list)

    def evaluation(self, step: int, accuracy: float) -> None:
        """A periodic evaluation at ``step``: checked when the train reward of ``step`` arrives."""
        self.pending = (step, accuracy)

    def train_reward(self, step: int, value: float) -> str | None:
        """A logged train reward (TRL's ``reward``) at ``step``; the alarm's one-line message when the pending
        evaluation is complete with it and the alarm fires, else None. Non-finite values are left out."""
        if isinstance(value, (int, float)) and math.isfinite(value):
            self.received.append(float(value))
        if self.pending is None or step < self.pending[0]:
            return None
        self.rewards.append(sum(self.received) / len(self.received) if self.received else math.nan)
        self.heldout.append(self.pending[1])
        self.received, self.pending = [], None
        if not integrity_alarm(self.rewards, self.heldout, self.window):
            return None
        r, a = self.rewards[-self.window :], self.heldout[-self.window :]
        return (
            f"integrity alarm at step {step}: over the last {self.window} evaluations the train reward rose "
            f"({r[0]:.3f} -> {r[-1]:.3f}) while held-out accuracy fell ({a[0]:.3f} -> {a[-1]:.3f}); the reward may "
            "be gamed: read the latest completions and run `rlvr audit rewards CONFIG`"
        )
