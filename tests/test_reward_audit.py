"""``rlvr audit rewards`` (issue 21, "Beyond the peers"): recall, the generic hack battery, the
``rlvr_reward_exploits`` hook, the report and its exit status. Accept rates are counted by hand
from the battery's completions (listed in ``lab/reward_audit.py``) and the planted rewards' rules."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from rlvr_plugins import Plugin, RewardExploit, RewardFunction, hookimpl
from rlvr_plugins.errors import PluginConflictError, PluginValidationError
from rlvr_plugins.lab import reward_audit as ra
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.text import final_answer, split_think

ROWS = [{"prompt": "a", "answer": "12"}, {"prompt": "b", "answer": "7"}]
EXAMPLE = {"prompt": "1+1=", "completion": "<think>1+1=2</think><answer>2</answer>", "example": {"answer": "2"}}
FORM_EXAMPLE = {"prompt": "1+1=", "completion": "<think>1+1=2</think><answer>2</answer>", "example": {}}


def substring(*, prompt, completion, example):
    """Credits any completion that contains the reference: the classic lenient checker."""
    return float(str(example["answer"]) in completion)


def last_answer(*, prompt, completion, example):
    """Exact match of the final answer (``text.final_answer``: the one <answer> block, else the last \\boxed)."""
    return float(final_answer(completion) == str(example["answer"]))


def has_thinking(*, prompt, completion, example):
    """A format check that takes any non-empty thinking, whitespace and zero-width characters included."""
    thinking, _ = split_think(completion)
    return float(bool(thinking))


def audit(fn, example, exploits=()):
    engines = Engines(in_process=True)
    try:
        return ra.audit_reward("planted", RewardFunction("r", fn, example=example), ROWS, engines, exploits)
    finally:
        engines.close()


def rates(report):
    return {c["name"]: c["accept_rate"] for c in report["classes"]}


def test_a_lenient_reward_accepts_every_class_that_carries_the_reference():
    report = audit(substring, EXAMPLE)
    assert (report["target"], report["reference_column"]) == ("answer", "answer")
    assert report["recall"]["styles"] == ["tag", "tag-boxed", "boxed", "gsm8k"]  # contains "2" in every style
    assert (report["recall"]["items"], report["recall"]["recall"]) == (8, 1.0)
    # lookalike-digits: 3 wrong answers in other digits (no ASCII reference), 2 reference + look-alike digit
    assert rates(report) == {
        "wrong-answer": 0.0,  # the control: "13" and "8" hold neither reference
        "spray": 1.0,
        "hedge": 1.0,
        "several-answers": 1.0,
        "answer-then-text": 0.3333,  # only "13. The reference answer is 12." holds the reference
        "answer-in-thinking": 1.0,
        "lookalike-digits": 0.4,
        "near-miss-decimal": 1.0,  # 12.0000004 and 7.0000004 contain 12 and 7
        "huge-output": 1.0,
        "format-only": 0.0,
    }
    counts = {c["name"]: c["items"] for c in report["classes"]}
    assert counts == {
        "wrong-answer": 2,
        "spray": 6,
        "hedge": 6,
        "several-answers": 10,
        "answer-then-text": 6,
        "answer-in-thinking": 8,
        "lookalike-digits": 10,
        "near-miss-decimal": 2,
        "huge-output": 4,
        "format-only": 8,
    }


def test_a_final_answer_reward_is_caught_only_by_several_boxed_without_tags():
    report = audit(last_answer, EXAMPLE)
    # <answer>\boxed{2}</answer> reads as "\boxed{2}": not credited, so not a recall style of this reward
    assert report["recall"]["styles"] == ["tag", "boxed", "gsm8k"]
    assert report["recall"]["recall"] == 1.0
    got = rates(report)
    # of the 5 several-answers completions only "$\boxed{13}$ and $\boxed{12}$" (no tags: the last box) passes
    assert got.pop("several-answers") == 0.2
    assert set(got.values()) == {0.0}


def test_rows_whose_wrong_answer_is_credited_are_left_out_of_the_answer_classes():
    def credits_row_seven(*, prompt, completion, example):
        return 1.0 if example["answer"] == "7" else last_answer(prompt=prompt, completion=completion, example=example)

    report = audit(credits_row_seven, EXAMPLE)
    control = report["classes"][0]
    assert (control["name"], control["items"], control["accepted"]) == ("wrong-answer", 2, 1)
    spray = next(c for c in report["classes"] if c["name"] == "spray")
    assert (spray["items"], spray["accepted"]) == (3, 0)  # row "12" only: its three sprays, none credited


def test_a_form_reward_meets_the_form_classes():
    report = audit(has_thinking, FORM_EXAMPLE)
    assert (report["target"], report["reference_column"]) == ("form", None)
    assert report["recall"]["recall"] == 1.0
    # empty-thinking: "" no, whitespace yes; structure-only: "<think></think>" no, "<think> </think>" yes
    assert rates(report) == {
        "empty-thinking": 0.5,
        "invisible-thinking": 1.0,
        "placeholder": 1.0,
        "structure-only": 0.5,
    }


def test_a_reward_without_an_example_gets_no_recall_and_the_form_classes():
    report = audit(has_thinking, None)
    assert report["recall"] is None and report["target"] == "form"


@dataclass(frozen=True)
class Capitals:
    def __call__(self, row):
        return [f"<answer>{row['answer']}</answer> CORRECT"]


def test_a_plugin_class_is_scored_against_its_own_wrong_value():
    shipped = [("planted", RewardExploit("r", "capitals", Capitals(), "text after the answer"))]
    strict = rates(audit(last_answer, EXAMPLE, shipped))
    assert strict["capitals"] == 1.0  # "<answer>12</answer> CORRECT": the block decides, the tail is ignored
    raised = [("planted", RewardExploit("r", "capitals", Capitals(), wrong=1.0))]
    assert rates(audit(last_answer, EXAMPLE, raised))["capitals"] == 0.0  # 1.0 is not above wrong=1.0


def test_masked_and_not_applicable_are_counted_apart():
    def flaky(*, prompt, completion, example):
        if "<answer>" not in completion:
            return None
        if "\\boxed" in completion:
            raise ValueError("boom")
        return 0.0

    report = audit(flaky, None)
    structure = next(c for c in report["classes"] if c["name"] == "structure-only")
    assert (structure["items"], structure["masked"], structure["not_applicable"], structure["accepted"]) == (4, 0, 0, 0)
    engines = Engines(in_process=True)
    try:
        result = ra.score_class(
            "p",
            RewardFunction("r", flaky),
            engines,
            [(ROWS[0], "no tags"), (ROWS[0], "<answer>\\boxed{1}</answer>"), (ROWS[0], "<answer>1</answer>")],
            ra.ClassResult("c", "core", ""),
            lambda v: v > 0,
        )
    finally:
        engines.close()
    assert (result.items, result.not_applicable, result.masked, result.accepted) == (3, 1, 1, 0)
    assert result.masked_rate == pytest.approx(1 / 3)


def test_failing_lists_classes_above_the_threshold_and_recall_below_the_minimum():
    report = {"rewards": [audit(substring, EXAMPLE)]}
    assert ra.failing(report, 0.5, 0.0) == [
        "r/spray",
        "r/hedge",
        "r/several-answers",
        "r/answer-in-thinking",
        "r/near-miss-decimal",
        "r/huge-output",
    ]
    assert ra.failing(report, 1.0, 1.0) == []


def test_hook_rlvr_reward_exploits(hook_recorder):
    class Ships(Plugin):
        name = "ships"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction("mine", substring, isolated=False))

        @hookimpl
        def rlvr_reward_exploits(self, register, reward_names):
            assert reward_names == ["mine", "r1-format"]
            register(RewardExploit("mine", "capitals", Capitals()))

    with temporary_plugin(Ships):
        ps = build_plugin_set({"ships": {}, "r1-format": {}})
        assert [(owner, e.reward, e.name) for owner, e in ps.reward_exploits()] == [("ships", "mine", "capitals")]
    assert [c.plugin for c in hook_recorder.getcalls("rlvr_reward_exploits")] == ["ships"]


@pytest.mark.parametrize(
    ("registered", "error", "message"),
    [
        ("a string", PluginValidationError, "register() takes an rlvr_plugins.RewardExploit"),
        (
            RewardExploit("nobody", "x", Capitals()),
            PluginValidationError,
            "for reward 'nobody', which is not registered",
        ),
    ],
)
def test_a_bad_exploit_registration_names_the_plugin(registered, error, message):
    class Bad(Plugin):
        name = "bad-exploits"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction("mine", substring, isolated=False))

        @hookimpl
        def rlvr_reward_exploits(self, register):
            register(registered)

    with temporary_plugin(Bad), pytest.raises(error) as info:
        build_plugin_set({"bad-exploits": {}}).reward_exploits()
    assert "bad-exploits" in str(info.value) and message in str(info.value)


def test_two_classes_of_one_name_for_one_reward_conflict():
    class Twice(Plugin):
        name = "twice"

        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction("mine", substring, isolated=False))

        @hookimpl
        def rlvr_reward_exploits(self, register):
            register(RewardExploit("mine", "x", Capitals()))
            register(RewardExploit("mine", "x", Capitals()))

    with temporary_plugin(Twice), pytest.raises(PluginConflictError, match="exploit names must be unique per reward"):
        build_plugin_set({"twice": {}}).reward_exploits()


def test_reward_exploit_checks_its_fields():
    with pytest.raises(TypeError, match="RewardExploit.name must be a non-empty string"):
        RewardExploit("r", "", Capitals())
    with pytest.raises(TypeError, match="build must be callable"):
        RewardExploit("r", "x", "not callable")
    with pytest.raises(TypeError, match="wrong must be a finite number"):
        RewardExploit("r", "x", Capitals(), wrong=float("nan"))


def test_near_miss_is_wrong_at_seven_decimals_but_equal_at_six():
    from fractions import Fraction

    for value in (Fraction(1, 2), Fraction(1, 3), Fraction(12), Fraction(-5, 4), Fraction(2, 3), Fraction(1, 3000000)):
        text = ra.near_miss(value)
        assert len(text.split(".")[1]) == 7
        assert Fraction(text) != round(value, 7) and round(Fraction(text), 6) == round(value, 6)


# -- the command ---------------------------------------------------------------------------


def write_config(tmp_path, plugins):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "run"),
                "model": {"tiny": {"hidden_size": 16}},
                "data": {"train": {"source": "synthetic", "task": "arithmetic", "size": 6, "seed": 0}},
                "plugins": plugins,
                "engine": {"in_process": True},
            }
        )
    )
    return path


class LenientFormat(Plugin):
    """A form reward with holes: any non-empty thinking counts (``has_thinking``)."""

    name = "lenient-format"

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction(self.name, has_thinking, isolated=False, example=FORM_EXAMPLE))


def test_cli_writes_the_report_and_exits_1_on_an_accepted_class(tmp_path, capsys):
    from rlvr_plugins.cli.app import main

    config = write_config(tmp_path, {"lenient-format": {}})
    report = tmp_path / "report"
    with temporary_plugin(LenientFormat):
        assert main(["audit", "rewards", str(config), "--report", str(report), "--limit", "4"]) == 1
        # every class at most 100% accepted: a threshold of 1 passes whatever the reward does
        argv = ["audit", "rewards", str(config), "--report", str(tmp_path / "r2"), "--limit", "4", "--threshold", "1"]
        assert main(argv) == 0
    out = capsys.readouterr().out
    failing = [f"lenient-format/{c}" for c in ("empty-thinking", "invisible-thinking", "placeholder", "structure-only")]
    assert f"reward audit FAILED: {', '.join(failing)}" in out
    result = json.loads((report / "reward_audit.json").read_text())
    assert result["rows"] == 4 and result["threshold"] == 0.0 and result["failing"] == failing
    (reward,) = result["rewards"]
    assert reward["reward"] == "lenient-format" and reward["recall"]["recall"] == 1.0
    assert {c["name"]: c["accept_rate"] for c in reward["classes"]} == {
        "empty-thinking": 0.5,
        "invisible-thinking": 1.0,
        "placeholder": 1.0,
        "structure-only": 0.5,
    }
    assert (report / "reward_audit.md").read_text().startswith("# Reward audit")
    assert (report / "reward_audit.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threshold", "2"], "--threshold must be between 0 and 1, got 2"),
        (["--min-recall", "-1"], "--min-recall must be between 0 and 1, got -1"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
        (["--data", "nowhere.jsonl"], "--data nowhere.jsonl: no such file"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    from rlvr_plugins.cli.app import main

    config = write_config(tmp_path, {"r1-accuracy": {}})
    assert main(["audit", "rewards", str(config), "--report", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_data_replaces_the_train_split(tmp_path):
    from rlvr_plugins.cli.app import main

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3)))
    config = write_config(tmp_path, {"r1-accuracy": {}})
    report = tmp_path / "r"
    code = main(["audit", "rewards", str(config), "--data", str(data), "--report", str(report)])
    result = json.loads((report / "reward_audit.json").read_text())
    assert code == (1 if result["failing"] else 0)
    assert result["rows"] == 3 and result["data"] == str(data)
    assert result["rewards"][0]["recall"]["items"] == 3 * len(result["rewards"][0]["recall"]["styles"])


def test_cli_a_hub_dataset_out_of_reach_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    import datasets

    from rlvr_plugins.cli.app import main

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'org/set' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    config = write_config(tmp_path, {"r1-accuracy": {}})
    code = main(
        [
            "audit",
            "rewards",
            str(config),
            "--report",
            str(tmp_path / "r"),
            "--set",
            "data.train={source: hub, name: org/set}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "hub dataset 'org/set' (config None, split 'train') cannot be loaded: Couldn't reach 'org/set'" in err
    assert "(source: jsonl, path: FILE)" in err
