"""Reward-weight schedules: a reward's or length penalty's ``weight`` as a function of the global step.

Written in a plugin's options as a mapping under ``weight:``::

    weight: {schedule: constant, value: 0.5}
    weight: {schedule: linear, from: 0.0, to: 1.0, steps: 100}        # warm-up, then 1.0
    weight: {schedule: step, points: [[0, 0.0], [50, 0.5], [200, 1.0]]}
    weight: {schedule: cosine, from: 1.0, to: 0.1, steps: 300}

A schedule is a pure function of the optimizer step (``trainer.state.global_step``): it has no
state to checkpoint, and a resumed run computes the same value at the same step. The plugin's
own ``weight`` option is then 1.0 and the framework multiplies the plugin's rewards (their
registered weights) and its length penalty by the schedule's value at each step
(:func:`rlvr_plugins.advantages.batch_advantages`). Plain Python, no torch: ``--check`` parses it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("constant", "linear", "step", "cosine")
KEYS = {
    "constant": ("value",),
    "linear": ("from", "to", "steps"),
    "step": ("points",),
    "cosine": ("from", "to", "steps"),
}
FORMS = {
    "constant": "{schedule: constant, value: 0.5}",
    "linear": "{schedule: linear, from: 0.0, to: 1.0, steps: 100}",
    "step": "{schedule: step, points: [[0, 0.0], [50, 1.0]]}",
    "cosine": "{schedule: cosine, from: 1.0, to: 0.1, steps: 300}",
}

SCHEDULE_NOTE = f"{' | '.join(KINDS)} over the step, e.g. {FORMS['linear']}"
"""How ``rlvr plugins`` says that a ``weight`` may be a schedule."""


def linear_value(step: int, start: float, end: float, steps: int) -> float:
    """Linear warm-up: ``w(t) = start + (end - start) * min(1, t / steps)`` (``end`` when ``steps = 0``).

    >>> linear_value(25, 0.0, 1.0, 100), linear_value(400, 0.0, 1.0, 100)
    (0.25, 1.0)
    """
    r = 1.0 if steps <= 0 else min(1.0, max(0, step) / steps)
    return start + (end - start) * r


def cosine_value(step: int, start: float, end: float, steps: int) -> float:
    """Cosine: ``w(t) = end + (start - end) * (1 + cos(pi * min(1, t / steps))) / 2`` (``end`` when ``steps = 0``).

    >>> cosine_value(0, 1.0, 0.0, 10), cosine_value(5, 1.0, 0.0, 10), cosine_value(99, 1.0, 0.0, 10)
    (1.0, 0.5, 0.0)
    """
    r = 1.0 if steps <= 0 else min(1.0, max(0, step) / steps)
    return end + (start - end) * (1.0 + math.cos(math.pi * r)) / 2.0


def step_value(step: int, points: Sequence[tuple[int, float]]) -> float:
    """Piecewise constant: the value of the last point ``(s_j, v_j)`` with ``s_j <= t`` (points sorted, ``s_0 = 0``).

    >>> step_value(49, [(0, 0.0), (50, 1.0)]), step_value(50, [(0, 0.0), (50, 1.0)])
    (0.0, 1.0)
    """
    value = points[0][1]
    for at, v in points:
        if at <= step:
            value = v
        else:
            break
    return float(value)


@dataclass(frozen=True)
class WeightSchedule:
    """A parsed schedule; :meth:`at` is its value at an optimizer step."""

    kind: str
    value: float = 1.0
    start: float = 0.0
    end: float = 1.0
    steps: int = 0
    points: tuple[tuple[int, float], ...] = ()

    def extremes(self) -> tuple[float, float]:
        """The least and the greatest value the schedule takes (at some step).

        >>> WeightSchedule("cosine", start=1.0, end=-0.5, steps=10).extremes()
        (-0.5, 1.0)
        """
        if self.kind == "constant":
            values = [self.value]
        elif self.kind == "step":
            values = [v for _, v in self.points]
        else:
            values = [self.start, self.end]
        return min(values), max(values)

    def as_config(self) -> dict[str, Any]:
        """The YAML mapping this schedule was parsed from (for ``plugins.json``).

        >>> WeightSchedule("linear", start=0.0, end=1.0, steps=10).as_config()
        {'schedule': 'linear', 'from': 0.0, 'to': 1.0, 'steps': 10}
        """
        if self.kind == "constant":
            return {"schedule": "constant", "value": self.value}
        if self.kind == "step":
            return {"schedule": "step", "points": [[at, v] for at, v in self.points]}
        return {"schedule": self.kind, "from": self.start, "to": self.end, "steps": self.steps}

    def at(self, step: int) -> float:
        if self.kind == "linear":
            return linear_value(step, self.start, self.end, self.steps)
        if self.kind == "cosine":
            return cosine_value(step, self.start, self.end, self.steps)
        if self.kind == "step":
            return step_value(step, self.points)
        return self.value


def warmup_schedule(steps: int) -> WeightSchedule:
    """The schedule a ``warmup_steps: N`` option stands for: ``step`` ``[[0, 0], [N, 1]]`` (constant 1 when ``N = 0``).

    >>> [warmup_schedule(3).at(t) for t in (0, 2, 3)], warmup_schedule(0).at(0)
    ([0.0, 0.0, 1.0], 1.0)
    """
    if steps <= 0:
        return WeightSchedule("constant", value=1.0)
    return WeightSchedule("step", points=((0, 0.0), (steps, 1.0)))


def _number(raw: Mapping[str, Any], key: str) -> float:
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{key!r} must be a finite number, got {v!r}")
    return float(v)


def _count(raw: Mapping[str, Any], key: str) -> int:
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{key!r} must be an integer >= 0, got {v!r}")
    return v


def _points(raw: Any) -> tuple[tuple[int, float], ...]:
    form = "'points' must be a list of [step, value] pairs, steps rising from 0"
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ValueError(f"{form}, got {raw!r}")
    out = []
    for p in raw:
        if not isinstance(p, Sequence) or isinstance(p, str) or len(p) != 2:
            raise ValueError(f"{form}, got point {p!r}")
        at, v = p
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise ValueError(f"{form}, got step {at!r}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{form}, got value {v!r} (a finite number)")
        out.append((at, float(v)))
    if out[0][0] != 0 or any(b[0] <= a[0] for a, b in zip(out, out[1:])):
        raise ValueError(f"{form}, got steps {[a for a, _ in out]}")
    return tuple(out)


def parse_schedule(raw: Mapping[str, Any]) -> WeightSchedule:
    """A :class:`WeightSchedule` from its YAML mapping, or a one-line ``ValueError`` saying what is valid.

    >>> parse_schedule({"schedule": "linear", "from": 0, "to": 2, "steps": 4}).at(1)
    0.5
    """
    kind = raw.get("schedule")
    if kind not in KINDS:
        raise ValueError(f"'schedule' must be one of {list(KINDS)}, got {kind!r}; e.g. weight: {FORMS['linear']}")
    keys = KEYS[kind]
    unknown = sorted(str(k) for k in raw if k != "schedule" and k not in keys)
    missing = [k for k in keys if k not in raw]
    if unknown or missing:
        what = "; ".join(
            [f"unknown key(s) {unknown}" for _ in [1] if unknown] + [f"missing {missing}" for _ in [1] if missing]
        )
        raise ValueError(f"a {kind} schedule takes {list(keys)} ({what}); e.g. weight: {FORMS[kind]}")
    if kind == "constant":
        return WeightSchedule(kind, value=_number(raw, "value"))
    if kind == "step":
        return WeightSchedule(kind, points=_points(raw["points"]))
    return WeightSchedule(kind, start=_number(raw, "from"), end=_number(raw, "to"), steps=_count(raw, "steps"))
