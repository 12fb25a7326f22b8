"""rlvr_plugins.text: the one place that reads answers out of completions and text out of messages."""

import ast
from pathlib import Path

import pytest

from rlvr_plugins.lab import metrics
from rlvr_plugins.text import (
    answer_block,
    answer_part,
    final_answer,
    gsm8k_final,
    last_boxed,
    message_text,
    split_think,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "completion, opened, expected",
    [
        ("<think>a</think>b", False, ("a", "b")),
        ("a</think>b", False, ("a", "b")),  # stray closer: thinking from the start
        ("<think>a</think>b</THINK>c", False, ("a</think>b", "c")),  # the LAST closer, any case
        ("<think>a</think>b<think>c", False, ("a", "b")),  # a re-opened <think> ends the answer
        ("<think>unfinished", False, ("unfinished", "")),
        ("no tags", False, (None, "no tags")),
        ("still thinking", True, ("still thinking", "")),
        ("<think>x</think>y", True, ("<think>x", "y")),  # opened by the template: no opener is looked for
    ],
)
def test_split_think(completion, opened, expected):
    assert split_think(completion, think_opened=opened) == expected
    assert answer_part(completion, think_opened=opened) == expected[1]


def test_answer_block():
    assert answer_block("x <answer> 5 </answer> y") == (True, "5")
    assert answer_block("<answer> </answer>") == (True, None)
    assert answer_block("<answer>5</answer><answer>6</answer>") == (True, None)
    assert answer_block("<answer>5</answer></answer>") == (True, None)
    assert answer_block("<answer>5") == (False, None)
    assert answer_block("</answer>5<answer>") == (False, None)


def test_last_boxed():
    assert last_boxed(r"\boxed{1} and \fbox {x^{2}}") == "x^{2}"
    assert last_boxed(r"\boxed{ \{a\} }") == r" \{a\} "
    assert last_boxed(r"\boxed{1} \boxed{2") is None  # the last box is never closed
    assert last_boxed("no box") is None


def test_gsm8k_final():
    assert gsm8k_final("She pays 1,200.\n#### 1,200") == "1200"
    assert gsm8k_final(r"#### \$ 18") == "18"
    assert gsm8k_final("#### $-3.5 dollars") == "-3.5"
    assert gsm8k_final("#### 4\n#### none") is None  # only the LAST #### counts
    assert gsm8k_final("4") is None


def test_final_answer_order():
    assert final_answer(r"\boxed{2} <answer>1</answer>") == "1"
    assert final_answer(r"<answer></answer> \boxed{2}") is None
    assert final_answer(r"#### 3 \boxed{ 2 }") == "2"
    assert final_answer(r"#### 3 \boxed{ }") is None
    assert final_answer("#### 3") == "3"
    assert final_answer("#### 3", gsm8k=False) is None
    assert final_answer(r"<think>\boxed{5}</think> no answer") is None
    assert final_answer(r"<think>\boxed{5}", think_opened=False) is None


def test_message_text():
    chat = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "U2"},
    ]
    assert message_text(chat) == "S\nU1\n\nU2"
    assert message_text(chat, roles=("user",)) == "U1\nU2"
    assert message_text(chat, sep="") == "SU1U2"
    assert message_text("plain") == "plain"
    assert message_text(None) == ""
    assert message_text(7) == "7"
    assert message_text(["a", {"content": "b"}]) == "a\nb"
    assert message_text(["a", {"role": "user", "content": "b"}], roles=("user",)) == "b"


def test_metrics_votes_with_the_shared_rule():
    """maj@k reads answers exactly as text.final_answer does (hand-picked cases where the old copy differed)."""
    assert metrics.extract_final_answer("<think>unclosed #### 5") is None
    assert metrics.extract_final_answer(r"<think>a</think>\boxed{1}<think>\boxed{2}") == "1"
    assert metrics.extract_final_answer("<answer>1</answer><answer>2</answer>") is None
    assert metrics.extract_final_answer("#### 4\n#### none") is None


def _code_strings(tree: ast.AST):
    """(string constant, name of the innermost call around it) for every string that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for arg in ast.walk(node):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and id(arg) not in docstrings:
                    yield arg.value, name


def _sources():
    for path in sorted([*ROOT.glob("src/rlvr_plugins/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py")]):
        if "demo" not in path.parts:  # the demo is a leaf that imports nothing of ours
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


# Each job's signature: a string constant inside a call. Allowed elsewhere, for another job:
#   qwen-thinking's compliance reward checks the *shape* of the think block (the first </think>).
JOBS = {
    "GSM8K final number": (
        lambda s, call: "####" in s and call in ("compile", "rfind", "findall", "search", "match"),
        set(),
    ),
    r"\boxed extraction": (lambda s, call: "(?:boxed|fbox)" in s, set()),
    "answer after </think>": (
        lambda s, call: (
            "</think>" in s
            and call in ("compile", "escape", "find", "rfind", "partition", "rpartition", "split", "rsplit")
        ),
        {"plugins/rlvr-qwen-thinking/src/rlvr_qwen_thinking/compliance.py"},
    ),
    "chat to text": (lambda s, call: s == "content" and call == "join", set()),
}
OLD_COPIES = {  # one copy of each job as it was written before text.py: the signatures catch them
    "GSM8K final number": r'_GSM8K = re.compile(r"####\s*(?:\$\s*)?(-?[\d,]*\.?\d+)")',
    r"\boxed extraction": r'_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")',
    "answer after </think>": 'closes = list(re.compile(r"</think>", re.IGNORECASE).finditer(completion))',
    "chat to text": '"\\n".join(str(m.get("content", "")) for m in prompt if m.get("role") == "user")',
}


def test_the_signatures_catch_the_old_copies():
    for job, code in OLD_COPIES.items():
        matches = JOBS[job][0]
        assert any(matches(s, call) for s, call in _code_strings(ast.parse(code))), job


def test_one_definition_of_each_shared_text_job():
    found = {job: set() for job in JOBS}
    for path, tree in _sources():
        for s, call in _code_strings(tree):
            for job, (matches, _) in JOBS.items():
                if matches(s, call):
                    found[job].add(path)
    for job, (_, allowed) in JOBS.items():
        assert found[job] - allowed <= {"src/rlvr_plugins/text.py"}, job
