"""Built-in environment ``calculator``: one tool, exact arithmetic on integers and decimals, no sandbox.

The expression is parsed with :mod:`ast` and only numbers, ``+ - * /``, unary signs and parentheses
are evaluated (never ``eval``); operands and results are capped in digits, so no call can take long
or eat memory. A bad expression raises ``ValueError``: TRL's tool loop returns its message to the
policy as the tool's answer and counts the call in ``tools/failure_frequency``.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from decimal import Decimal, DivisionByZero, InvalidOperation, localcontext
from typing import Annotated, Any

from .. import hookimpl
from ..fields import Rule
from ..plugin import Environment, Plugin

MAX_EXPRESSION_CHARS = 1000
DIVISION_DIGITS = 20  # significant digits of a division that does not come out even
SIGNS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-"})
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}

Number = int | Decimal


def digits(value: Number) -> int:
    """Significant size of a value in decimal digits (integer part plus fraction).

    >>> digits(-12345), digits(Decimal("3.25"))
    (5, 3)
    """
    if isinstance(value, int):
        return len(str(abs(value)))
    sign, ds, exponent = value.as_tuple()
    return max(len(ds), len(ds) + int(exponent), -int(exponent))


def calculate(expression: str, max_digits: int = 100) -> str:
    """The exact value of an arithmetic expression: integers and decimals, ``+ - * /`` (also ``× ÷ −``),
    unary signs and parentheses. Integer division that does not come out even gives a decimal rounded
    to :data:`DIVISION_DIGITS` significant digits.

    Raises ``ValueError`` naming the problem: anything else in the expression, a division by zero, or
    an operand or result longer than ``max_digits`` digits (checked before multiplying, so ``9**9**9``
    written out as products cannot run away).

    >>> calculate("(12 + 3.5) × 4")
    '62'
    >>> calculate("7 / 2"), calculate("-(2 - 5) * 1.10")
    ('3.5', '3.3')
    >>> calculate("2 ** 8")
    Traceback (most recent call last):
    ValueError: unsupported operation ** (use + - * / and parentheses)
    """
    text = str(expression).translate(SIGNS).strip()
    if not text:
        raise ValueError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        raise ValueError(f"not an arithmetic expression: {text[:80]!r}") from exc
    with localcontext() as context:
        context.prec = max_digits
        context.traps[DivisionByZero] = True
        value = _evaluate(tree.body, max_digits)
    return _plain(value)


def _evaluate(node: ast.AST, max_digits: int) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value: Number = node.value if isinstance(node.value, int) else Decimal(ast.unparse(node))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        inner = _evaluate(node.operand, max_digits)
        value = -inner if isinstance(node.op, ast.USub) else inner
    elif isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _evaluate(node.left, max_digits), _evaluate(node.right, max_digits)
        if isinstance(node.op, ast.Mult) and digits(left) + digits(right) > max_digits + 1:
            raise ValueError(f"result longer than {max_digits} digits")
        value = _apply(type(node.op), left, right)
    elif isinstance(node, ast.BinOp):
        symbol = {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//"}.get(type(node.op), type(node.op).__name__)
        raise ValueError(f"unsupported operation {symbol} (use + - * / and parentheses)")
    else:
        raise ValueError(f"unsupported element {ast.unparse(node)[:40]!r} (numbers, + - * / and parentheses only)")
    if digits(value) > max_digits:
        raise ValueError(f"number longer than {max_digits} digits")
    return value


def _apply(op: type[ast.operator], left: Number, right: Number) -> Number:
    if op is ast.Div:
        if right == 0:
            raise ValueError("division by zero")
        if isinstance(left, int) and isinstance(right, int) and left % right == 0:
            return left // right
    if isinstance(left, int) and isinstance(right, int) and op is not ast.Div:
        return OPERATORS[op](left, right)
    try:
        if op is ast.Div:
            with localcontext() as context:
                context.prec = min(context.prec, DIVISION_DIGITS)
                return Decimal(left) / Decimal(right)
        return OPERATORS[op](Decimal(left), Decimal(right))
    except (InvalidOperation, DivisionByZero) as exc:
        raise ValueError(f"cannot compute: {type(exc).__name__}") from exc


def _plain(value: Number) -> str:
    """An integer as is; a decimal in plain notation without trailing zeros (``3.50`` → ``3.5``, ``4.0`` → ``4``)."""
    if isinstance(value, int):
        return str(value)
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


class CalculatorTool:
    """The ``calculator`` environment: ``calculate(expression)`` is its one tool; it keeps no state."""

    def __init__(self, max_digits: int = 100):
        self.max_digits = max_digits

    def reset(self, **row: Any) -> None:
        return None

    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression exactly.

        Args:
            expression: integers or decimals with + - * / and parentheses, for example "(1234 + 5.5) * 678".

        Returns:
            The exact value of the expression.
        """
        return calculate(expression, self.max_digits)


@dataclass(frozen=True)
class CalculatorFactory:
    """A fresh :class:`CalculatorTool` per call (TRL's ``environment_factory``)."""

    max_digits: int

    def __call__(self) -> CalculatorTool:
        return CalculatorTool(self.max_digits)


class Calculator(Plugin):
    name = "calculator"
    description = "environment 'calculator': a calculate(expression) tool, exact + - * / on integers and decimals"

    @dataclass
    class Options:
        max_digits: Annotated[int, Rule(lambda v: 1 <= v <= 10_000, "an integer from 1 to 10000")] = 100

    @hookimpl
    def rlvr_environments(self, register):
        register(Environment("calculator", CalculatorFactory(self.options.max_digits), self.description))
