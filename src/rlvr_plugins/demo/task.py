"""Synthetic, verifiable arithmetic task for the CPU demo (pure Python, deterministic).

A problem is ``"<a>+<b>="``; the target completion is a short worked solution
inside ``<think>…</think>`` followed by the number in ``<answer>…</answer>``.

Worked-solution styles (``cot``):

* ``"columns"`` (default): each column spelled out, least-significant first, carry
  included: ``57+68=`` → ``<think>7+8=15,5+6+1=12</think><answer>125</answer>``.
  Every step only needs nearby tokens, which a ~1M-parameter model learns within a
  few hundred SFT steps (the compact styles below are not learned in that budget).
* ``"reverse"``: the digits of the sum, least-significant first:
  ``57+68=`` → ``<think>521</think><answer>125</answer>`` (short, but hard to learn fast).
* ``"carries"``: per column ``<sum digit><carry out>``: ``<think>51 21 1</think>``.
* ``"none"``: no ``<think>`` part; only ``<answer>N</answer>``.

With ``pad_operands=True`` operands are zero-padded to ``max_digits`` (fixed layout).

``carry_slip`` (default 0) imitates an imperfect cold-start teacher: that share of the
worked solutions (the ``solution`` column, the SFT target) are written by a teacher who
forgets to add the carry, ``57+68=`` → ``<think>7+8=15,5+6=11</think><answer>115</answer>``.
The ``answer`` column (what the rewards check) is always the true sum. Which rows slip
is drawn from its own random stream, so the problems do not depend on ``carry_slip``.

``difficulty`` is the number of digits of the longer operand. The operand digit
counts are drawn as: difficulty ``d`` from ``difficulty_weights`` over
``min_digits..max_digits`` (uniform by default), one operand gets exactly ``d``
digits, the other ``1..d`` digits (uniform), in random order.

Train and evaluation problems are made disjoint by :func:`split_train_eval`:
the evaluation set is drawn first (without repeats) from its own random stream,
then training problems are drawn from another stream, rejecting every
``(a, op, b)`` that is in the evaluation set.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TASK_OPTIONS: dict = {
    "min_digits": 1,
    "max_digits": 3,
    "difficulty_weights": None,
    "cot": "columns",
    "op": "+",
    "pad_operands": False,
    "carry_slip": 0.0,
}

COT_STYLES = ("reverse", "carries", "columns", "none")


def _rand_number(rng: random.Random, digits: int) -> int:
    if digits == 1:
        return rng.randint(0, 9)
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def draw_operands(rng: random.Random, levels: Sequence[int], weights: Sequence[float] | None) -> tuple[int, int]:
    """Two operands: difficulty ``d`` drawn from ``levels`` (by ``weights``), one operand of exactly ``d``
    digits, the other of ``1..d`` digits (uniform), in random order."""
    d = rng.choices(levels, weights=weights)[0]
    a, b = _rand_number(rng, d), _rand_number(rng, rng.randint(1, d))
    return (b, a) if rng.random() < 0.5 else (a, b)


def _worked_solution(a: int, b: int, cot: str, width: int = 0) -> str:
    total = a + b
    answer = str(total)
    if cot == "reverse":
        think = str(total).zfill(width + 1 if width else 0)[::-1]
    elif cot == "carries":
        da, db = str(a)[::-1], str(b)[::-1]
        steps, carry = [], 0
        for i in range(max(len(da), len(db))):
            s = (int(da[i]) if i < len(da) else 0) + (int(db[i]) if i < len(db) else 0) + carry
            carry = s // 10
            steps.append(f"{s % 10}{carry}")
        if carry:
            steps.append(str(carry))
        think = " ".join(steps)
    elif cot == "columns":
        da, db = str(a)[::-1], str(b)[::-1]
        steps, carry = [], 0
        for i in range(max(len(da), len(db))):
            x, y = (int(da[i]) if i < len(da) else 0), (int(db[i]) if i < len(db) else 0)
            s = x + y + carry
            steps.append(f"{x}+{y}" + (f"+{carry}" if carry else "") + f"={s}")
            carry = s // 10
        think = ",".join(steps)
    elif cot == "none":
        return f"<answer>{answer}</answer>"
    else:
        raise ValueError(f"unknown cot style {cot!r}; expected one of {COT_STYLES}")
    return f"<think>{think}</think><answer>{answer}</answer>"


def _slipped_solution(a: int, b: int) -> str:
    """The columns solution of a teacher who never adds the carry: each column's last digit, the top column whole."""
    da, db = str(a)[::-1], str(b)[::-1]
    steps, digits = [], []
    n = max(len(da), len(db))
    for i in range(n):
        x, y = (int(da[i]) if i < len(da) else 0), (int(db[i]) if i < len(db) else 0)
        steps.append(f"{x}+{y}={x + y}")
        digits.append(str(x + y) if i == n - 1 else str((x + y) % 10))
    return f"<think>{','.join(steps)}</think><answer>{int(''.join(reversed(digits)))}</answer>"


def make_problem(a: int, b: int, cot: str = "reverse", op: str = "+", width: int = 0) -> dict:
    """One problem row for operands ``a`` and ``b`` (zero-padded to ``width`` digits if ``width``)."""
    if op != "+":
        raise ValueError(f"only addition ('+') is supported, got {op!r}")
    sa, sb = (str(a).zfill(width), str(b).zfill(width)) if width else (str(a), str(b))
    return {
        "prompt": f"{sa}{op}{sb}=",
        "answer": str(a + b),
        "solution": _worked_solution(a, b, cot, width),
        "difficulty": max(len(str(a)), len(str(b))),
    }


def make_problems(
    n: int,
    seed: int,
    *,
    exclude: Iterable[str] | None = None,
    unique: bool = False,
    stream: str = "train",
    **task_options,
) -> list[dict]:
    """Draw ``n`` problems deterministically from ``seed`` (and ``stream``).

    ``exclude``: prompts never to return (e.g. the evaluation set's prompts).
    ``unique``: no prompt is returned twice.
    ``task_options``: ``min_digits``, ``max_digits``, ``difficulty_weights``, ``cot``, ``op``.
    """
    opts, levels = checked_options(DEFAULT_TASK_OPTIONS, task_options, "task")
    hi = levels[-1]
    weights: Sequence[float] | None = opts["difficulty_weights"]
    if weights is not None and len(weights) != len(levels):
        raise ValueError(f"difficulty_weights needs {len(levels)} entries, got {len(weights)}")

    slip = float(opts["carry_slip"])
    if slip and opts["cot"] != "columns":
        raise ValueError("carry_slip needs cot='columns'")
    rng = random.Random(f"rlvr-demo/{stream}/{seed}")  # str seeds are hashed with sha512: stable
    slip_rng = random.Random(f"rlvr-demo/{stream}/{seed}/slip")

    def draw() -> tuple[str, tuple[int, int, dict]]:
        a, b = draw_operands(rng, levels, weights)
        row = make_problem(a, b, cot=opts["cot"], op=opts["op"], width=hi if opts["pad_operands"] else 0)
        return row["prompt"], (a, b, row)

    rows = []
    for a, b, row in distinct_draws(n, draw, exclude=exclude or (), unique=unique):
        if slip and slip_rng.random() < slip:
            row["solution"] = _slipped_solution(a, b)
        rows.append(row)
    return rows


def checked_options(defaults: dict, given: dict, what: str) -> tuple[dict, list[int]]:
    """``given`` over ``defaults``, and the digit levels ``min_digits..max_digits``; an unknown key or
    a bad range is refused."""
    opts = {**defaults, **given}
    unknown = set(opts) - set(defaults)
    if unknown:
        raise TypeError(f"unknown {what} options: {sorted(unknown)}; valid: {sorted(defaults)}")
    lo, hi = opts["min_digits"], opts["max_digits"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or not 1 <= lo <= hi:
        raise ValueError(f"need integers 1 <= min_digits <= max_digits, got min_digits={lo!r}, max_digits={hi!r}")
    return opts, list(range(lo, hi + 1))


def distinct_draws(n: int, draw: Callable[[], tuple[str, T]], *, exclude: Iterable[str] = (), unique: bool) -> list[T]:
    """``n`` values of ``draw()`` (which returns ``(key, value)``), in order, skipping every value whose
    key is in ``exclude`` and, when ``unique``, whose key was already returned."""
    excluded, seen, values = set(exclude), set(), []
    attempts = 0
    while len(values) < n:
        attempts += 1
        if attempts > 1000 * n + 10_000:
            raise ValueError("could not draw enough distinct problems; widen the digit range")
        key, value = draw()
        if key in excluded or (unique and key in seen):
            continue
        seen.add(key)
        values.append(value)
    return values


def split_train_eval(n_train: int, n_eval: int, seed: int, **task_options) -> tuple[list[dict], list[dict]]:
    """Training and held-out problems, guaranteed disjoint (by prompt).

    The evaluation set (no repeats) depends only on ``seed`` and the task options,
    not on ``n_train``.
    """
    eval_rows = eval_problems(n_eval, seed, **task_options)
    train_rows = make_problems(n_train, seed, exclude={r["prompt"] for r in eval_rows}, stream="train", **task_options)
    return train_rows, eval_rows


def eval_problems(n_eval: int, seed: int, **task_options) -> list[dict]:
    """The held-out problems of :func:`split_train_eval` alone (they do not depend on the train set)."""
    return make_problems(n_eval, seed, unique=True, stream="eval", **task_options)


def extract_answer(completion: str) -> str | None:
    """The text between the first ``<answer>`` and the following ``</answer>``, or None."""
    start = completion.find("<answer>")
    if start < 0:
        return None
    start += len("<answer>")
    end = completion.find("</answer>", start)
    if end < 0:
        return None
    return completion[start:end].strip()


def is_well_formed(completion: str, cot: str = "reverse") -> bool:
    """Exactly ``<think>…</think><answer>…</answer>`` with non-empty parts (``<answer>…</answer>`` for cot="none")."""
    c = completion.strip()
    if cot != "none":
        if not c.startswith("<think>"):
            return False
        end = c.find("</think>")
        if end < 0 or not c[len("<think>") : end].strip() or "<think>" in c[len("<think>") : end]:
            return False
        c = c[end + len("</think>") :]
    if not (c.startswith("<answer>") and c.endswith("</answer>")):
        return False
    inner = c[len("<answer>") : -len("</answer>")]
    return bool(inner.strip()) and "<answer>" not in inner and "</answer>" not in inner and "<think>" not in inner
