"""``rlvr score`` with code-tests enabled: correct, wrong, partial and hostile completions."""

from __future__ import annotations

import json
import os
import secrets

import pytest
from code_helpers import host_can_fork, survivors

from rlvr_plugins import cli

FENCE = "```"
TESTS = [
    {"input": "1 2\n", "output": "3\n"},
    {"input": "5 7\n", "output": "12\n"},
    {"input": "0 0\n", "output": "0\n"},
    {"input": "9 1\n", "output": "10\n"},
]


def row(code, group="add", **extra):
    completion = f"<think>Add the numbers.</think>\n{FENCE}python\n{code}\n{FENCE}" if code is not None else "I cannot."
    return {"prompt": "Read a and b, print a+b.", "completion": completion, "tests": TESTS, "group": group, **extra}


@pytest.mark.slow  # ~30-60 s on the shared 2-core box: torch import, tiny tokenizer, engine workers
def test_rlvr_score_with_code_tests(tmp_path):
    token = f"304.{secrets.randbelow(10**6)}"
    escape = f"/tmp/rlvr-code-e2e-{secrets.token_hex(6)}"
    rows = [
        row("a, b = map(int, input().split())\nprint(a + b)"),  # correct
        row("a, b = map(int, input().split())\nprint(a - b - 100)"),  # wrong
        row("a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)"),  # 2 of 4
        row(None),  # no program
        row(
            f"import os\nfor _ in range(50):\n    try:\n        os.posix_spawn('/bin/sleep', ['sleep', '{token}'], {{}})\n"
            f"    except OSError:\n        pass\nopen({escape!r}, 'w').write('x')\n"
            "import socket\nsocket.create_connection(('127.0.0.1', 22))\nprint(3)"
        ),  # hostile
        row("while True:\n    pass"),  # hangs
        {"prompt": "2+2", "completion": "4", "group": "math"},  # no tests: does not apply
    ]
    src = tmp_path / "rollouts.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "score.yaml"
    config.write_text(
        "model: {tiny: {}}\n"
        "plugins:\n  code-tests: {mode: share, time_limit_s: 1.0, total_time_s: 6.0}\n"
        "engine: {workers: 2, timeout_s: 15}\n"
    )
    out = tmp_path / "scored.jsonl"
    assert cli.main(["score", str(config), str(src), "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["code-tests"] for r in scored] == [1.0, 0.0, 0.5, 0.0, 0.0, 0.0, None]
    assert [r["scored"] for r in scored] == [True] * 6 + [False]
    assert survivors(token, wait_s=2.0) == [] and not os.path.exists(escape)
    assert host_can_fork()
