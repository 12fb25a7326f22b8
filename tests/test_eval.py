"""``rlvr eval``: metrics against hand computation and brute force, answer normalisation and data
errors on the real math sets, prompting modes, the vLLM backend's error, and an end-to-end run."""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import cli
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.lab import metrics
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import TINY, reward_plugin_class, shared_data
from rlvr_plugins.train.config import load_config
from rlvr_plugins.train.data import DataError, load_rows, normalise_answer, plain_answer

DATA = shared_data()
needs_data = pytest.mark.skipif(DATA is None, reason="../shared/data is absent (set RLVR_SHARED_DATA)")


pytestmark = pytest.mark.usefixtures("one_torch_thread")

# ---------------------------------------------------------------- pass@k, maj@k, summaries


def brute_force_pass_at_k(correct: list[bool], k: int) -> float:
    subsets = list(itertools.combinations(range(len(correct)), k))
    return sum(any(correct[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_equals_brute_force_over_all_subsets(n):
    for c in range(n + 1):
        flags = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert metrics.pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(flags, k), abs=1e-12)


def test_pass_at_k_by_hand_and_bad_arguments():
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert metrics.pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)  # C(7,2)/C(10,2)
    assert metrics.pass_at_k(4, 0, 4) == 0.0 and metrics.pass_at_k(4, 1, 4) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        metrics.pass_at_k(4, 1, 5)


def test_answer_key_defines_answer_equality():
    same = [
        ["0.5", "1/2", r"\frac{1}{2}", r"$\dfrac{1}{2}$", ".5"],
        ["1200", "1,200", " 1200. ", "1200.0"],
        [r"\text{Yes}", "yes", "YES"],
        ["-3", r"-\frac{6}{2}"],
    ]
    for group in same:
        assert len({metrics.answer_key(a) for a in group}) == 1, group
    keys = {metrics.answer_key(g[0]) for g in same}
    assert len(keys) == len(same)
    assert metrics.answer_key(None) is None and metrics.answer_key(" $ $ ") is None


def test_majority_and_maj_at_k_by_hand():
    keys = ["7", "8", "8", None, "7", "7"]
    correct = [True, False, False, False, True, True]
    assert metrics.majority_answer(keys[:3]) == "8"
    assert metrics.maj_at_k(keys, correct, 1) == 1.0  # "7"
    assert metrics.maj_at_k(keys, correct, 3) == 0.0  # "8" twice
    assert metrics.maj_at_k(keys, correct, 4) == 0.0  # None is no vote: still "8"
    assert metrics.majority_answer(keys[:5]) == "7"  # 7:2, 8:2, a tie: "7" was seen first
    assert metrics.maj_at_k(keys, correct, 5) == 1.0
    assert metrics.maj_at_k(keys, correct, 6) == 1.0
    assert metrics.maj_at_k([None, None], [False, False], 2) == 0.0


def test_tie_goes_to_the_answer_seen_first():
    assert metrics.majority_answer(["b", "a", "a", "b"]) == "b"
    assert metrics.maj_at_k(["b", "a", "a", "b"], [False, True, True, False], 4) == 0.0


def test_summarise_by_hand():
    p1 = metrics.ProblemSamples(
        [True, False, False, True], [True, True, False, True], ["3", "4", None, "3"], [10, 20, 30, 40], {"level": 1}
    )
    p2 = metrics.ProblemSamples([False] * 4, [False] * 4, ["1", "2", "2", None], [5, 5, 5, 5], {"level": 2})
    out = metrics.summarise([p1, p2], [1, 2, 4])
    assert out["problems"] == 2 and out["samples_per_problem"] == 4
    assert out["accuracy"] == pytest.approx((2 / 4 + 0) / 2)
    assert out["pass@1"] == pytest.approx(0.25)
    assert out["pass@2"] == pytest.approx((1 - 1 / 6) / 2)  # C(2,2)/C(4,2) = 1/6 for p1
    assert out["pass@4"] == pytest.approx(0.5)
    assert out["maj@1"] == pytest.approx(0.5) and out["maj@2"] == pytest.approx(0.5)  # p1: "3" (tie, first)
    assert out["maj@4"] == pytest.approx(0.5)  # p1: "3" x2; p2: "2" x2, wrong
    assert out["format_rate"] == pytest.approx(3 / 8)
    assert out["answer_rate"] == pytest.approx(6 / 8)
    assert out["mean_length"] == {
        "all": pytest.approx(120 / 8),
        "correct": pytest.approx(25.0),
        "wrong": pytest.approx(70 / 6),
    }
    by_level = metrics.breakdown([p1, p2], "level", [1])
    assert list(by_level) == ["1", "2"]
    assert by_level["1"]["accuracy"] == 0.5 and by_level["2"]["accuracy"] == 0.0


def test_greedy_accuracy_is_the_share_correct():
    problems = [metrics.ProblemSamples([c], [True], ["1"], [3]) for c in (True, False, True)]
    out = metrics.summarise(problems, [1])
    assert out["accuracy"] == out["pass@1"] == out["maj@1"] == pytest.approx(2 / 3)
    assert out["mean_length"]["wrong"] == 3


def test_extract_final_answer_rules():
    assert metrics.extract_final_answer("<think>x <answer>1</answer></think><answer> 2 </answer>") == "2"
    assert metrics.extract_final_answer(r"so \boxed{\frac{3}{4}} and done") == r"\frac{3}{4}"
    assert metrics.extract_final_answer("Natalia sold 72.\n#### 1,072") == "1072"
    assert metrics.extract_final_answer(r"<think>\boxed{5}</think> no answer") is None
    assert metrics.extract_final_answer("just text 42") is None


def test_breakdown_columns_detects_known_columns_and_checks_requested():
    rows = [{"prompt": "a", "level": "Level 1", "type": "Algebra"}, {"prompt": "b", "level": "Level 2", "type": "Geo"}]
    assert metrics.breakdown_columns(rows) == ["level", "type"]
    assert metrics.breakdown_columns(rows, ["type"]) == ["type"]
    with pytest.raises(KeyError, match="breakdown column 'subject' is not in every row"):
        metrics.breakdown_columns(rows, ["subject"])


# ---------------------------------------------------------------- answer normalisation, real data


def test_normalise_answer_by_hand():
    assert normalise_answer("a\n#### 1,234", "gsm8k") == "1234"
    assert normalise_answer("#### -5", "gsm8k") == "-5"
    assert normalise_answer(r"thus $\boxed{\frac{\sqrt{3}}{2}}$.", "boxed") == r"\frac{\sqrt{3}}{2}"
    assert normalise_answer(r"\boxed{1} then \boxed{2}", "boxed") == "2"
    assert normalise_answer(["$2^{1009}$"], "olympiadbench") == "2^{1009}"
    assert [plain_answer(v) for v in (27.0, "025", 3, " x ")] == ["27", "25", "3", "x"]
    assert normalise_answer("no marker", "gsm8k") is None and normalise_answer(r"\boxed{1", "boxed") is None
    assert normalise_answer([], "olympiadbench") is None


def _config(tmp_path, data, **extra):
    config = {"model": {"tiny": {}}, "data": data, "plugins": {"r1-accuracy": {}}, **extra}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_config(path)


@needs_data
def test_gsm8k_answers_match_the_r1_reference_parser_on_every_row(tmp_path):
    from rlvr_r1.answers import reference_answer

    config = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(DATA / "gsm8k" / "train.jsonl")},
            "columns": {"prompt": "question"},
            "answer_format": "gsm8k",
        },
    )
    rows = load_rows(config, "train")
    assert len(rows) == 7473
    assert (rows[0]["answer"], rows[1]["answer"]) == ("72", "10")
    assert rows[0]["raw_answer"].endswith("#### 72") and rows[0]["prompt"].startswith("Natalia sold clips")
    assert all(r["answer"] == reference_answer(r["raw_answer"]) for r in rows)
    with_commas = [r for r in rows if "," in r["raw_answer"].rsplit("####", 1)[1]]
    assert with_commas and all("," not in r["answer"] for r in with_commas)


@needs_data
def test_minerva_boxed_answers_match_the_r1_reference_parser(tmp_path):
    from rlvr_r1.answers import reference_answer

    config = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(DATA / "eval" / "minerva_math.jsonl")},
            "columns": {"prompt": "problem", "answer": "solution", "subject": "type"},
            "answer_format": "boxed",
        },
    )
    rows = load_rows(config, "train")
    assert len(rows) == 272 and rows[0]["answer"] == "1.6"
    assert all(r["answer"] == reference_answer(r["solution"]) for r in rows)
    assert metrics.breakdown_columns(rows) == ["subject", "type"]


@needs_data
def test_olympiadbench_and_plain_answers(tmp_path):
    config = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(DATA / "eval" / "olympiadbench.jsonl"), "limit": 5},
            "eval": {"source": "jsonl", "path": str(DATA / "eval" / "amc23.jsonl"), "answer_format": "plain"},
            "columns": {"prompt": "question", "answer": "final_answer"},
            "answer_format": "olympiadbench",
        },
    )
    rows = load_rows(config, "train")
    assert [r["answer"] for r in rows] == ["2", r"\frac{1}{2 n+2}", "2^{1009}", "2", "2n-2"]
    assert rows[1]["raw_answer"] == [r"$\frac{1}{2 n+2}$"] and rows[0]["subfield"] == "Combinatorics"
    with pytest.raises(DataError, match=r"amc23.jsonl: row 0 \(line 1\) has no column 'final_answer'"):
        load_rows(config, "eval")
    amc = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(DATA / "eval" / "amc23.jsonl")},
            "columns": {"prompt": "question"},
            "answer_format": "plain",
        },
    )
    assert [r["answer"] for r in load_rows(amc, "train")[:3]] == ["27", "36", "45"]
    aime = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(DATA / "eval" / "aime24.jsonl")},
            "columns": {"prompt": "problem"},
            "answer_format": "plain",
        },
    )
    assert [r["answer"] for r in load_rows(aime, "train")[6:8]] == ["721", "25"]  # "025" as a number


@needs_data
def test_data_errors_name_the_file_and_line_on_real_files(tmp_path):
    lines = (DATA / "gsm8k" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    data = {
        "train": {"source": "jsonl", "path": str(tmp_path / "bad.jsonl")},
        "columns": {"prompt": "question"},
        "answer_format": "gsm8k",
    }
    config = _config(tmp_path, data)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "", lines[1][:40], lines[2]]) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:3: malformed JSON"):
        load_rows(config, "train")
    row = json.loads(lines[2])
    row["answer"] = row["answer"].replace("####", "answer:")
    bad.write_text("\n".join([lines[0], lines[1], "", json.dumps(row)]) + "\n")
    with pytest.raises(
        DataError,
        match=r"bad.jsonl:4: answer_format gsm8k expects a worked solution ending in "
        r"'#### N' in the 'answer' column",
    ):
        load_rows(config, "train")
    bad.write_text("\n\n")
    with pytest.raises(DataError, match="is empty"):
        load_rows(config, "train")
    bad.write_text("\n".join(lines) + "\n")
    config["data"]["columns"] = {"prompt": "questio"}
    with pytest.raises(
        DataError,
        match=r"row 0 \(line 1\) has no column 'questio'.*columns present: "
        r"\['answer', 'question'\]",
    ):
        load_rows(config, "train")
    config["data"]["columns"] = {"prompt": "question", "answer": "solution"}
    with pytest.raises(DataError, match=r"no column 'solution'"):
        load_rows(config, "train")


def test_hub_split_is_loaded_by_name_and_normalised(tmp_path, monkeypatch):
    import datasets

    calls = []

    def fake_load_dataset(name, config=None, split=None):
        calls.append((name, config, split))
        return datasets.Dataset.from_list(
            [
                {"problem": "What is $1+1$?", "solution": r"It is $\boxed{2}$.", "level": "Level 1", "type": "Algebra"},
                {
                    "problem": "Half of 1?",
                    "solution": r"So $\boxed{\frac{1}{2}}$",
                    "level": "Level 2",
                    "type": "Algebra",
                },
            ]
        )

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    config = _config(
        tmp_path,
        {
            "train": {
                "source": "hub",
                "name": "DigitalLearningGmbH/MATH-lighteval",
                "config": "default",
                "split": "train",
                "limit": 2,
            },
            "columns": {"prompt": "problem", "answer": "solution"},
            "answer_format": "boxed",
        },
    )
    rows = load_rows(config, "train")
    assert calls == [("DigitalLearningGmbH/MATH-lighteval", "default", "train")]
    assert [r["answer"] for r in rows] == ["2", r"\frac{1}{2}"] and rows[1]["raw_answer"].startswith("So")
    assert metrics.breakdown_columns(rows) == ["level", "type"]
    monkeypatch.setattr(
        datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_list([{"problem": "x", "solution": "y"}])
    )
    with pytest.raises(
        DataError,
        match=r"hub dataset DigitalLearningGmbH/MATH-lighteval: row 0: answer_format "
        r"boxed expects a solution with a closed \\boxed\{...\}",
    ):
        load_rows(config, "train")


def test_unknown_answer_format_is_a_config_error(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"data.answer_format must be one of \['gsm8k', 'boxed', 'olympiadbench', "
        r"'plain'\], got 'latex'",
    ):
        _config(tmp_path, {"train": {"source": "jsonl", "path": "x.jsonl"}, "answer_format": "latex"})


def test_eval_section_values_are_checked_with_the_config(tmp_path):
    with pytest.raises(ConfigError) as err:
        _config(
            tmp_path,
            {"train": {"source": "jsonl", "path": "x.jsonl"}},
            eval={"n": 4, "temperature": 0, "k": [1, 8], "mode": "two-shot", "backend": "jax"},
        )
    text = str(err.value)
    for needle in (
        "eval.k=[1, 8] asks for more samples than eval.n=4",
        "eval.mode must be one of",
        "eval.backend must be one of ['transformers', 'vllm'], got 'jax'",
        "eval.n=4 samples at temperature 0",
    ):
        assert needle in text, needle


# ---------------------------------------------------------------- prompting modes


@needs_data
def test_few_shot_and_cot_prompts(tmp_path):
    from rlvr_plugins.cli.eval_cmd import build_prompts
    from rlvr_plugins.train.sections import EvalSection

    COT_INSTRUCTION = EvalSection().cot_instruction

    gsm = DATA / "gsm8k"
    config = _config(
        tmp_path,
        {
            "train": {"source": "jsonl", "path": str(gsm / "train.jsonl"), "limit": 10},
            "eval": {"source": "jsonl", "path": str(gsm / "test.jsonl"), "limit": 2},
            "columns": {"prompt": "question"},
            "answer_format": "gsm8k",
        },
    )
    rows = load_rows(config, "eval")
    _, prompted = build_prompts(rows, EvalSection(mode="few-shot", shots=2), config, "eval")
    train = load_rows(config, "train")
    expected = (
        f"Question: {train[0]['prompt']}\nAnswer: {train[0]['raw_answer']}\n\n"
        f"Question: {train[1]['prompt']}\nAnswer: {train[1]['raw_answer']}\n\n"
        f"Question: {rows[1]['prompt']}\nAnswer:"
    )
    assert prompted[1]["prompt"] == expected and "#### 72" in expected
    kept, prompted = build_prompts(train, EvalSection(mode="few-shot", shots=3), config, "train")
    assert len(kept) == 7 and kept[0] is train[3]  # the shots are not evaluated
    _, prompted = build_prompts(rows, EvalSection(mode="cot"), config, "eval")
    assert prompted[0]["prompt"] == rows[0]["prompt"] + COT_INSTRUCTION
    assert "\\boxed{}" in COT_INSTRUCTION


# ---------------------------------------------------------------- backends and end to end


def test_vllm_backend_without_vllm_says_how_to_install(tmp_path, capsys):
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "model": {"tiny": {}},
                "output_dir": str(tmp_path / "run"),
                "data": {"train": {"source": "synthetic", "task": "arithmetic", "size": 4}},
                "plugins": {"r1-accuracy": {}},
                "eval": {"backend": "vllm"},
            }
        )
    )
    assert cli.main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert "eval.backend 'vllm' needs vLLM, which is not installed: pip install 'rlvr-plugins[vllm]'" in err
    assert not (tmp_path / "run").exists()


@dataclass(frozen=True)
class EvenLength:
    """1.0 when the completion has an even number of characters: a reward with mixed outcomes."""

    def __call__(self, *, prompt, completion, example):
        return float(len(completion) % 2 == 0)


EvenPlugin = reward_plugin_class("even-length", EvenLength(), isolated=False)


@pytest.mark.slow
def test_eval_end_to_end_metrics_match_the_samples(tmp_path):
    out = tmp_path / "run"
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(out),
                "seed": 3,
                "model": {"tiny": TINY},
                "data": {
                    "train": {"source": "synthetic", "task": "arithmetic", "size": 8, "seed": 0},
                    "eval": {"source": "synthetic", "task": "arithmetic", "size": 6, "seed": 0},
                },
                "plugins": {"even-length": {}, "r1-format": {}},
                "engine": {"in_process": True},
                "eval": {
                    "reward": "even-length",
                    "format_reward": "r1-format",
                    "n": 4,
                    "temperature": 1.0,
                    "max_new_tokens": 6,
                    "k": [1, 2, 4],
                },
            }
        )
    )
    with temporary_plugin(EvenPlugin):
        assert cli.main(["eval", str(path)]) == 0
    report = json.loads((out / "eval.json").read_text())
    samples = [json.loads(line) for line in (out / "eval_samples.jsonl").read_text().splitlines()]
    assert len(samples) == 24 and report["n"] == 4 and report["format"] == "r1-format"
    by_problem = [[s for s in samples if s["problem"] == i] for i in range(6)]
    correct = [[len(s["completion"]) % 2 == 0 for s in group] for group in by_problem]
    assert [[s["correct"] for s in g] for g in by_problem] == correct
    assert 0 < sum(map(sum, correct)) < 24, "the parity reward should give mixed outcomes"
    m = report["metrics"]
    for k in (1, 2, 4):
        expected = sum(brute_force_pass_at_k(c, k) for c in correct) / 6
        assert m[f"pass@{k}"] == pytest.approx(expected)
    assert m["accuracy"] == pytest.approx(sum(map(sum, correct)) / 24)
    assert m["format_rate"] == pytest.approx(sum(s["r1-format"] == 1.0 for s in samples) / 24)
    lengths_correct = [s["length"] for s in samples if s["correct"]]
    assert m["mean_length"]["correct"] == pytest.approx(sum(lengths_correct) / len(lengths_correct))
    assert all(0 <= s["length"] <= 6 for s in samples)
    assert report["rewards"]["even-length"] == pytest.approx(m["accuracy"])
    levels = report["breakdown"]["difficulty"]
    assert sum(g["problems"] for g in levels.values()) == 6
    md = (out / "eval.md").read_text()
    assert "| accuracy | pass@1 | pass@2 | pass@4 | maj@1 | maj@2 | maj@4 |" in md and "## By difficulty" in md
    assert json.loads((out / "eval_plugins.json").read_text())["rewards"][0]["name"] == "even-length"
    assert yaml.safe_load((out / "eval_config.yaml").read_text())["eval"]["n"] == 4
    assert not (out / "config.yaml").exists()  # a training run's own config.yaml is never overwritten
    shutil.rmtree(out)


@needs_data
@pytest.mark.slow
def test_eval_few_shot_on_gsm8k_with_the_cpu_recipe(tmp_path):
    out = tmp_path / "run"
    gsm = DATA / "gsm8k"
    recipe = Path(__file__).resolve().parents[1] / "configs" / "cpu" / "r1_zero.yaml"
    assert (
        cli.main(
            [
                "eval",
                str(recipe),
                "--set",
                f"output_dir={out}",
                "--set",
                "engine.in_process=true",
                "--set",
                f"data.train.path={gsm / 'train.jsonl'}",
                "--set",
                f"data.eval.path={gsm / 'test.jsonl'}",
                "--set",
                "eval={mode: few-shot, shots: 1, n: 2, temperature: 1.0, max_new_tokens: 4, format_reward: r1-format}",
            ]
        )
        == 0
    )
    report = json.loads((out / "eval.json").read_text())
    samples = [json.loads(line) for line in (out / "eval_samples.jsonl").read_text().splitlines()]
    assert report["metrics"]["problems"] == 4 and len(samples) == 8 and report["mode"] == "few-shot"
    assert [s["answer"] for s in samples[::2]] == ["18", "3", "70000", "540"]  # GSM8K test, normalised
    prompt = samples[0]["prompt"]
    assert prompt.startswith("A conversation between User and Assistant.")  # the R1-Zero template
    assert "Question: Natalia sold clips" in prompt and "#### 72\n\nQuestion: Janet" in prompt
    assert report["metrics"]["accuracy"] == pytest.approx(sum(s["correct"] for s in samples) / 8)
    assert report["format"] == "r1-format" and report["reward"] == "r1-accuracy"


def test_extract_final_answer_is_linear_on_a_megabyte_of_adversarial_input():
    from rlvr_plugins.testing import adversarial_texts, time_each

    texts = adversarial_texts(1_000_000)
    texts["openers_then_a_block"] = "<answer>" * 100_000 + "</answer><answer> 7 </answer>"
    out = time_each(metrics.extract_final_answer, texts, limit_s=2.0)
    # r1-accuracy's rule: several <answer> tags make the answer ambiguous (None), the last box decides
    assert {name: result for name, (result, _) in out.items() if result is not None} == {"closed_boxes": "7"}


def test_answer_key_is_linear_and_keys_huge_numbers_as_text():
    from rlvr_plugins.testing import adversarial_texts, time_each

    texts = {**adversarial_texts(1_000_000), "digits_then_letter": "1" * 1_000_000 + "x"}
    out = time_each(metrics.answer_key, texts, limit_s=2.0)
    assert out["digits_then_letter"][0] == "1" * 1_000_000 + "x"
    assert out["digits"][0] == "1" * 1_000_000
    huge = "\\frac{" + "2" * 5000 + "}{2}"
    assert metrics.answer_key(huge) == huge
    assert metrics.answer_key("\\frac{" + "2" * 4000 + "}{2}") == "1" * 4000


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1" * 10_000, "1" * 10_000),
        ("-000" + "7" * 5_000 + ".2500", "-" + "7" * 5_000 + ".25"),
        ("1" * 400 + ".5", "1" * 400 + ".5"),
        ("3.14159265358979323846", "3.14159265358979323846"),
        ("+.50", "0.5"),
        ("-0.000", "0"),
        ("5.", "5"),
        (12.5, "12.5"),
    ],
)
def test_plain_answers_keep_every_digit(value, expected):
    assert plain_answer(value) == expected


@dataclass(frozen=True)
class OnlyEven:
    """1.0 for an even number of characters; ``None`` (does not apply) otherwise."""

    def __call__(self, *, prompt, completion, example):
        return 1.0 if len(completion) % 2 == 0 else None


@dataclass(frozen=True)
class FailsOnOdd:
    """0.5 for an even number of characters; raises otherwise (the engine cannot score it)."""

    def __call__(self, *, prompt, completion, example):
        if len(completion) % 2:
            raise ValueError("odd")
        return 0.5


OnlyEvenPlugin = reward_plugin_class("only-even", OnlyEven(), isolated=False)
FailsOnOddPlugin = reward_plugin_class("fails-on-odd", FailsOnOdd(), isolated=False)


def _no_nan(text: str):
    raise ValueError(f"not JSON: {text}")


@pytest.mark.slow
def test_eval_samples_are_json_with_null_and_a_reason_where_a_reward_gave_no_value(tmp_path):
    out = tmp_path / "run"
    config = {
        "output_dir": str(out),
        "seed": 3,
        "model": {"tiny": TINY},
        "data": {"train": {"source": "synthetic", "task": "arithmetic", "size": 4, "seed": 0}},
        "plugins": {"only-even": {}, "fails-on-odd": {}},
        "engine": {"in_process": True},
        "eval": {"reward": "only-even", "split": "train", "n": 4, "temperature": 1.0, "max_new_tokens": 6},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    with temporary_plugin(OnlyEvenPlugin), temporary_plugin(FailsOnOddPlugin):
        assert cli.main(["eval", str(tmp_path / "c.yaml")]) == 0
    lines = (out / "eval_samples.jsonl").read_text().splitlines()
    samples = [json.loads(line, parse_constant=_no_nan) for line in lines]  # strict JSON: no NaN, no Infinity
    odd = [len(s["completion"]) % 2 == 1 for s in samples]
    assert 0 < sum(odd) < len(samples), "the sampled lengths should mix odd and even"
    for s, is_odd in zip(samples, odd):
        if is_odd:
            assert s["only-even"] is None and s["fails-on-odd"] is None
            assert s["unscored"] == {
                "only-even": "did not apply (the reward returned None)",
                "fails-on-odd": "could not score (the reward failed, timed out or returned no usable value)",
            }
        else:
            assert (s["only-even"], s["fails-on-odd"]) == (1.0, 0.5) and "unscored" not in s
