"""``rlvr audit rewards`` on every shipped config that enables rewards, with the shipped data (issue 21).

The hub datasets of the full-size recipes are replaced by the local copies in ``../shared/data``
(MATH-style ``problem``/``solution`` rows: Minerva math; GSM8K for the Qwen3 recipe); a config whose data
is not on this machine is skipped. Every class the audit finds accepted must be a known defect
(:data:`KNOWN`); each known defect has an ``xfail`` test that passes once its fix is merged (strict=False;
then its entry moves to :data:`FIXED`, whose classes must stay rejected).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
MINERVA = SHARED / "eval" / "minerva_math.jsonl"
GSM8K = SHARED / "gsm8k" / "test.jsonl"
ROWS = 16

OLYMPIAD = SHARED / "eval" / "olympiadbench.jsonl"
OLYMPIAD_ARGS = ["--data", str(OLYMPIAD), "--set", "data.columns={prompt: question, answer: final_answer}"]
# (config under configs/, the data file it needs or None, the extra arguments, the rows audited)
RUNS: dict[str, tuple[str, Path | None, list[str], int]] = {
    "demo": ("demo.yaml", None, [], ROWS),
    "cpu/r1": ("cpu/r1.yaml", None, [], ROWS),
    "cpu/kimi": ("cpu/kimi.yaml", None, [], ROWS),
    "cpu/qwen3_fusion": ("cpu/qwen3_fusion.yaml", None, [], ROWS),
    "cpu/r1_zero": ("cpu/r1_zero.yaml", SHARED / "gsm8k" / "train.jsonl", [], ROWS),  # its own data.train
    "cpu/dr_grpo": ("cpu/dr_grpo.yaml", SHARED / "gsm8k" / "train.jsonl", [], ROWS),
    "r1_zero": ("r1_zero.yaml", MINERVA, ["--data", str(MINERVA)], ROWS),
    "dr_grpo": ("dr_grpo.yaml", MINERVA, ["--data", str(MINERVA)], ROWS),
    "kimi": ("kimi.yaml", MINERVA, ["--data", str(MINERVA)], ROWS),
    "r1_cold_start": ("r1_cold_start.yaml", MINERVA, ["--data", str(MINERVA)], ROWS),
    "r1": ("r1.yaml", MINERVA, ["--data", str(MINERVA), "--set", "data.columns.answer=solution"], ROWS),
    "qwen3_fusion": ("qwen3_fusion.yaml", GSM8K, ["--data", str(GSM8K)], ROWS),
    # OlympiadBench's row 22 is the first with a fraction reference (\frac{25}{2}): item 4's rounding
    "r1_zero+olympiadbench": (
        "r1_zero.yaml",
        OLYMPIAD,
        [*OLYMPIAD_ARGS, "--set", "data.answer_format=olympiadbench"],
        24,
    ),
}

FIXED = {  # accepted before their fixes merged (seen in this test's runs on the branch), rejected since
    "r1-format/invisible-thinking": "issue 21 item 12: a <think> block of zero-width characters or NUL was credited",
    "r1-format/placeholder": "issue 21 item 12 ('empty' by what a reader sees): a thinking of only '---' was credited",
    "r1-language/encoded-script": "issue 21 item 12: a Chinese chain of thought as HTML entities scored 1 for 'en'",
    "r1-accuracy/near-miss-decimal": "issue 21 item 4: 0.5000004 was credited for \\frac{1}{2} (6-decimal rounding)",
    "qwen-mode-compliance/invisible-thinking": "issue 21 item 12, in qwen-thinking: invisible thinking was thinking",
    "qwen-mode-compliance/placeholder": "issue 21 item 12, in qwen-thinking: a thinking of '...' was thinking",
    "r1-accuracy/answer-then-text": "issue 21, found by the audit: '19. The reference answer is 18.' was credited "
    "for 18, and '1.6+1' followed by any sentence for 1.6 (an answer followed by prose is graded on its first "
    "statement since)",
}
KNOWN: dict[str, str] = {}  # accepted today: xfail until fixed (strict=False), then move the entry to FIXED

pytestmark = pytest.mark.slow
_REPORTS: dict[str, dict] = {}


def audit(name: str, tmp_path_factory) -> dict:
    """The JSON report of the audit run ``RUNS[name]`` (run once per session)."""
    from rlvr_plugins.cli.app import main

    config, needed, args, rows = RUNS[name]
    if needed is not None and not needed.is_file():
        pytest.skip(f"{needed} is absent: the data of run {name} is not on this machine")
    if name not in _REPORTS:
        report = tmp_path_factory.mktemp("audit") / name.replace("/", "_")
        argv = ["audit", "rewards", str(REPO / "configs" / config), "--limit", str(rows), "--report", str(report)]
        code = main([*argv, *args])
        result = json.loads((report / "reward_audit.json").read_text(encoding="utf-8"))
        assert code == (1 if result["failing"] else 0)
        result["expected_rows"] = rows
        _REPORTS[name] = result
    return _REPORTS[name]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_shipped_config_has_no_hole_beyond_the_known_ones(name, tmp_path_factory):
    result = audit(name, tmp_path_factory)
    assert result["rows"] == result["expected_rows"]
    for reward in result["rewards"]:
        assert reward["recall"] is None or reward["recall"]["recall"] == 1.0, reward["reward"]
        assert all(c["masked"] == 0 for c in reward["classes"]), reward["reward"]
    unknown = [f for f in result["failing"] if f not in KNOWN]
    assert not unknown, f"{name}: hacks accepted that no issue names: {unknown}"


@pytest.mark.parametrize(
    "known",
    [
        *FIXED,
        *(pytest.param(key, marks=pytest.mark.xfail(reason=reason, strict=False)) for key, reason in KNOWN.items()),
    ],
)
def test_known_defect_is_fixed(known, tmp_path_factory):
    reward = known.split("/")[0]
    seen = 0
    for name in sorted(RUNS):
        try:
            result = audit(name, tmp_path_factory)
        except pytest.skip.Exception:
            continue
        if any(r["reward"] == reward for r in result["rewards"]):
            seen += 1
            assert known not in result["failing"], name
    if not seen:
        pytest.skip(f"no shipped config with its data here enables {reward}")
