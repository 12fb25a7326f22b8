"""What ``code-tests`` reads from a completion and a dataset row, and how outputs are compared.

The exact rules are in the plugin README; each function's docstring restates its part.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr_plugins.text import answer_part

__all__ = [
    "TestCase",
    "AssertTests",
    "extract_program",
    "fenced_blocks",
    "load_cases",
    "load_assert_tests",
    "normalise_output",
    "outputs_match",
    "program_names",
    "unimported_modules",
    "PYTHON_TAGS",
]

PYTHON_TAGS = ("python", "python3", "py")

_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([^\s`]*)([^\n]*)(\n?)", re.MULTILINE)
_CLOSER_REST = re.compile(r"[ \t]*")


@dataclass(frozen=True)
class TestCase:
    """One stdin/stdout case."""

    __test__ = False  # not a pytest test class

    input: str
    output: str


@dataclass(frozen=True)
class AssertTests:
    """Assert-style test code (MBPP / HumanEval), the names it takes from the program (see
    :func:`program_names`), and the standard-library modules it uses without importing them
    (see :func:`unimported_modules`), which the checker binds to its own modules."""

    code: str
    names: tuple[str, ...]
    modules: tuple[str, ...] = ()


def fenced_blocks(text: str):
    """``(tag, content)`` of each closed fenced block, in order, in one linear pass over the lines.

    An opening fence is a line ``` ```tag ``` (spaces before and after the backticks allowed,
    anything after the tag ignored) that is not the last line; the block ends at the next line
    that is only ``` ``` ``` with spaces or tabs around it. After the block, the search for the
    next opening fence resumes on the line after its closing fence. An opening fence with no
    closing line after it ends the search: no later fence could be closed either.

    >>> list(fenced_blocks("```py\\na\\n```\\n```\\nb\\n```"))
    [('py', 'a\\n'), ('', 'b\\n')]
    """
    opened = None
    for line in _FENCE_LINE.finditer(text):
        if opened is not None and _CLOSER_REST.fullmatch(line.group(1) + line.group(2)):
            yield opened[0], text[opened[1] : line.start()]
            opened = None
        elif opened is None and line.group(3):
            opened = (line.group(1), line.end())


def extract_program(completion: str, *, think_opened: bool = False) -> str | None:
    """The program: the last closed fenced block tagged ``python``/``python3``/``py`` in the
    answer part (see :func:`answer_part`); if there is none, the last closed untagged block;
    else None. Blocks in other languages are ignored; an unclosed fence is not a block (see
    :func:`fenced_blocks`). Linear in the completion's length.

    >>> extract_program("<think>```python\\nprint(0)\\n```</think>Answer:\\n```python\\nprint(1)\\n```")
    'print(1)\\n'
    """
    tagged, untagged = None, None
    for tag, content in fenced_blocks(answer_part(completion, think_opened=think_opened)):
        tag = tag.lower()
        if tag in PYTHON_TAGS:
            tagged = content
        elif not tag:
            untagged = content
    program = tagged if tagged is not None else untagged
    return program if program is not None and program.strip() else None


def _text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value else "")
    raise ValueError(f"test case {what} must be a string (or a list of lines), got {type(value).__name__}")


def load_cases(raw: Any) -> list[TestCase]:
    """Stdin/stdout cases from a ``tests`` value: a list of ``{"input", "output"}``, a mapping
    of parallel lists ``{"inputs": [...], "outputs": [...]}`` (APPS) or ``{"input": [...],
    "output": [...]}`` (CodeContests), or a JSON string of any of these. ``None`` or an
    empty string gives no cases. APPS call-based problems (``fn_name``) are refused.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tests column is not valid JSON: {exc}") from exc
    if isinstance(raw, Mapping):
        if raw.get("fn_name"):
            raise ValueError("call-based tests (fn_name) are not supported; use stdin/stdout or assert tests")
        inputs = raw.get("inputs", raw.get("input"))
        outputs = raw.get("outputs", raw.get("output"))
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise ValueError(
                "tests mapping needs parallel lists 'inputs'/'outputs' (or 'input'/'output') "
                f"of equal length; keys present: {sorted(raw)}"
            )
        return [TestCase(_text(i, "input"), _text(o, "output")) for i, o in zip(inputs, outputs)]
    if isinstance(raw, list):
        cases = []
        for k, case in enumerate(raw):
            if not isinstance(case, Mapping) or "input" not in case or "output" not in case:
                raise ValueError(f"test case {k} must be a mapping with 'input' and 'output', got {case!r:.80}")
            cases.append(TestCase(_text(case["input"], "input"), _text(case["output"], "output")))
        return cases
    raise ValueError(f"tests column must be a list, a mapping or a JSON string, got {type(raw).__name__}")


def load_assert_tests(test: Any, *, entry_point: Any = None, setup: Any = None) -> AssertTests | None:
    """Assert-style test code: a string, or a list of statements (MBPP ``test_list``) joined by
    newlines. ``setup`` (MBPP ``test_setup_code``) goes before it. When ``entry_point`` is set and
    the code defines ``check`` (HumanEval), ``check(<entry_point>)`` is appended."""
    if test is None or (isinstance(test, (str, list)) and not test):
        return None
    code = _text(test, "test code")
    if not code.strip():
        return None
    if setup:
        code = _text(setup, "setup code") + "\n" + code
    if entry_point and re.search(r"^def check\(", code, re.MULTILINE):
        if not str(entry_point).isidentifier():
            raise ValueError(f"entry_point must be a Python identifier, got {entry_point!r}")
        code += f"\n\ncheck({entry_point})\n"
    free = program_names(code)
    modules = unimported_modules(code, free)
    names = tuple(name for name in free if name not in modules)
    if not names:
        raise ValueError(
            "the test code uses no function of the program (every name it reads it defines itself): "
            "it cannot tell a right program from a wrong one"
        )
    return AssertTests(code, names, modules)


def program_names(code: str) -> tuple[str, ...]:
    """The names ``code`` reads but never binds (assigns, defines, imports, takes as a
    parameter), builtins aside: those it takes from the program. Scopes are not told apart.

    >>> program_names("import math\\ndef check(f):\\n    assert math.isclose(f(2), helper(1))\\ncheck(area)")
    ('area', 'helper')
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"test code is not valid Python: line {exc.lineno}: {exc.msg}") from None
    read, bound = set(), set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return tuple(sorted(read - bound))


def unimported_modules(code: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Which of ``names`` are standard-library modules the tests use unimported (MBPP's
    ``math.isclose`` relied on the solution's ``import math``): a module name that is only ever
    read as ``name.attribute``. A name the tests call or compare (``copy([1])``, a program's
    function named like a module) is the program's.

    >>> unimported_modules("assert math.isclose(area(2), 4.0)\\nassert copy([1]) == [1]", ("area", "copy", "math"))
    ('math',)
    """
    stdlib = set(getattr(sys, "stdlib_module_names", ())) & set(names)
    tree = ast.parse(code)
    as_module = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    other_use = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in as_module}
    return tuple(sorted(stdlib - other_use))


def normalise_output(text: str) -> str:
    r"""``\r\n`` → ``\n``, spaces/tabs/``\r`` at the end of each line removed, trailing empty
    lines removed. Nothing else: case, leading spaces, blank lines between lines and the
    number formatting all count.

    >>> normalise_output("1 2  \r\n3\n\n")
    '1 2\n3'
    """
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(line.rstrip(" \t\r") for line in lines).rstrip("\n")


def outputs_match(actual: str, expected: str) -> bool:
    r"""Whole-output equality after :func:`normalise_output` on both sides.

    >>> outputs_match("1\n", "1\n2\n")
    False
    """
    return normalise_output(actual) == normalise_output(expected)
