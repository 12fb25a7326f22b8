"""``rlvr_check_dataset``: a problem a plugin can see in the data is reported once, at load, naming the rows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import Plugin, cli, hookimpl
from rlvr_plugins.errors import PluginValidationError
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.train.config import load_config
from rlvr_plugins.train.data import MAX_NAMED_ROWS, DataError, dataset_warnings, load_rows

DATA = Path(os.environ["RLVR_SHARED_DATA"]) if os.environ.get("RLVR_SHARED_DATA") else None
DIGITS = 100_001  # rlvr_r1.answers.MAX_NUMBER_DIGITS + 1
HUGE = "7" * DIGITS
TOO_MANY = (
    "r1-accuracy: {where}: 1 row: the reference answer (column 'answer') holds a number of more than "
    "100000 digits, which math-verify cannot parse; it is compared only as a plain decimal or as text: "
    "row 1 (line 3)"
)


def write_config(tmp_path, rows, plugins=None, blank_line_after=0):
    """A config whose train split is a JSONL file of ``rows`` (a blank line after row
    ``blank_line_after``, so that rows and file lines differ)."""
    lines = [json.dumps(r) for r in rows]
    lines.insert(blank_line_after + 1, "")
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    config = {
        "model": {"tiny": {}},
        "data": {"train": {"source": "jsonl", "path": "train.jsonl"}},
        "plugins": plugins or {"r1-accuracy": {}},
        "engine": {"in_process": True},
        "output_dir": str(tmp_path / "out"),
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "c.yaml"


ROWS = [{"prompt": "a", "answer": "12"}, {"prompt": "b", "answer": HUGE}, {"prompt": "c", "answer": "3"}]


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rlvr_plugins.train.data"]


def test_dataset_warnings_group_rows_by_problem_and_name_at_most_five():
    problems = [(i, "bad") for i in (9, 1, 3, 5, 7, 2, 8)] + [(4, "odd"), (4, "odd")]
    assert MAX_NAMED_ROWS == 5
    assert dataset_warnings("p", problems, 10, "d.jsonl", [i + 2 for i in range(10)]) == [
        "p: d.jsonl: 7 rows: bad: row 1 (line 3), row 2 (line 4), row 3 (line 5), row 5 (line 7), row 7 (line 9) "
        "and 2 more",
        "p: d.jsonl: 1 row: odd: row 4 (line 6)",
    ]
    assert dataset_warnings("p", None, 3, "data.train") == []
    assert dataset_warnings("p", [(0, "x")], 3, "data.train") == ["p: data.train: 1 row: x: row 0"]
    for bad in ([(3, "x")], [("0", "x")], [0], [(0, 1)]):
        with pytest.raises(
            PluginValidationError,
            match=r"^plugin 'p': rlvr_check_dataset returned .*; it returns "
            r"\(row index in 0\.\.2, problem text\) pairs$",
        ):
            dataset_warnings("p", bad, 3, "data.train")


def test_a_reference_that_can_never_be_parsed_is_reported_once_at_load_naming_its_row(tmp_path, caplog):
    config = load_config(write_config(tmp_path, ROWS))
    plugin_set = build_plugin_set(config["plugins"])
    with caplog.at_level("WARNING"):
        rows = load_rows(config, "train", plugin_set)
        assert load_rows(config, "train") == rows  # no plugin set: nothing is checked
    assert messages(caplog) == [TOO_MANY.format(where=tmp_path / "train.jsonl")]
    caplog.clear()
    ((_, reward),) = plugin_set.reward_functions()
    with caplog.at_level("WARNING"):
        scores = [reward.fn(prompt="b", completion=f"\\boxed{{{answer}}}", example=rows[1]) for answer in (HUGE, "12")]
    assert scores == [1.0, 0.0] and caplog.records == []  # scoring does not report it again


class Refuses(Plugin):
    name = "refuses-data"

    @hookimpl
    def rlvr_check_dataset(self, rows, split):
        raise DataError(f"{split}: row 0 cannot be scored")


def test_a_plugin_refuses_data_by_raising_a_data_error(tmp_path):
    with temporary_plugin(Refuses):
        config = load_config(write_config(tmp_path, ROWS, {"r1-accuracy": {}, "refuses-data": {}}))
        with pytest.raises(DataError, match="^train: row 0 cannot be scored$"):
            load_rows(config, "train", build_plugin_set(config["plugins"]))


class Stop(Exception):
    pass


@pytest.mark.parametrize("command", ["score", "eval", "train"])
def test_commands_report_before_the_first_generation_or_score(tmp_path, caplog, monkeypatch, command):
    """``rlvr score`` checks its completions file before scoring, ``rlvr eval`` its split before
    sampling, ``rlvr train`` its splits before the model is loaded."""
    seen = []

    def stop(*args, **kwargs):
        seen.append(messages(caplog))
        raise Stop

    path = write_config(tmp_path, ROWS)
    if command == "score":
        monkeypatch.setattr("rlvr_plugins.cli.score_cmd.score_rows", stop)
        completions = tmp_path / "completions.jsonl"
        completions.write_text("\n".join(json.dumps({**r, "completion": "<answer>1</answer>"}) for r in ROWS) + "\n")
        args, where, line = ["score", str(path), str(completions)], completions, 2
    elif command == "eval":
        monkeypatch.setattr("rlvr_plugins.cli.eval_cmd.sample_rows", stop)
        args, where, line = ["eval", str(path), "--set", "eval.split=train"], tmp_path / "train.jsonl", 3
    else:
        monkeypatch.setattr("rlvr_plugins.train.modeling.load_model", stop)
        args, where, line = ["train", str(path)], tmp_path / "train.jsonl", 3
    with caplog.at_level("WARNING"), pytest.raises(Stop):
        cli.main(args)
    assert seen == [[TOO_MANY.format(where=where).replace("(line 3)", f"(line {line})")]]


@pytest.mark.skipif(DATA is None, reason="../shared/data is absent (set RLVR_SHARED_DATA)")
def test_the_check_costs_gsm8k_train_well_under_a_second(tmp_path, caplog):
    config = {
        "model": {"tiny": {}},
        "plugins": {"r1-accuracy": {}},
        "data": {
            "train": {"source": "jsonl", "path": str(DATA / "gsm8k" / "train.jsonl")},
            "columns": {"prompt": "question"},
        },
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    config = load_config(tmp_path / "c.yaml")
    plugin_set = build_plugin_set(config["plugins"])
    rows = load_rows(config, "train")
    started = time.perf_counter()
    with caplog.at_level("WARNING"):
        plugin_set.call("rlvr_check_dataset", rows=rows, split="train")
    assert len(rows) == 7473 and messages(caplog) == []
    assert time.perf_counter() - started < 1.0


# -- a reward that applies to no row of a split (issue 21, item 1) ---------------------------------------------------

SOLUTION_ROWS = [{"prompt": "1+1=", "solution": "2"}, {"prompt": "2+3=", "solution": "5"}]


def unread_answer(where):
    return (
        f"rlvr: error: reward 'r1-accuracy' (plugin 'r1-accuracy') reads column 'answer' (option answer_column), "
        f"which no row of the train split ({where}) has: it would apply to no item and the run would train without "
        "it; columns present: ['prompt', 'solution']; did you mean answer_column: solution "
        "(--set plugins.r1-accuracy.answer_column=solution)?\n"
    )


@pytest.mark.parametrize("check", [True, False], ids=["--check", "train"])
def test_a_split_without_the_column_a_reward_reads_is_refused_at_load_with_a_did_you_mean(
    tmp_path, capsys, monkeypatch, check
):
    monkeypatch.setattr("rlvr_plugins.train.modeling.load_model", lambda *a, **k: pytest.fail("model loaded"))
    path = write_config(tmp_path, SOLUTION_ROWS, {"r1-accuracy": {}, "r1-format": {}})
    assert cli.main(["train", str(path), *(["--check"] if check else [])]) == 2
    assert capsys.readouterr().err == unread_answer(tmp_path / "train.jsonl")
    fixed = ["--set", "plugins.r1-accuracy.answer_column=solution"]
    assert cli.main(["train", str(path), "--check", *fixed]) == 0
    assert "config OK" in capsys.readouterr().out


def test_a_column_that_is_null_in_every_row_is_refused_and_one_value_is_enough(tmp_path):
    rows = [{"prompt": "a", "answer": None}, {"prompt": "b", "answer": None}]
    config = load_config(write_config(tmp_path, rows))
    with pytest.raises(
        DataError,
        match=r"reads column 'answer' \(option answer_column\), which no row of the "
        r"train split \(.*train.jsonl\) has \(every value is null\)",
    ):
        load_rows(config, "train", build_plugin_set(config["plugins"]))
    rows[1]["answer"] = "3"  # a reward may apply to part of a split (mixed math and code data)
    config = load_config(write_config(tmp_path, rows))
    assert len(load_rows(config, "train", build_plugin_set(config["plugins"]))) == 2


def test_code_and_judge_rewards_declare_the_columns_they_read():
    plugins = {"code-tests": {"tests_column": "cases"}, "judge-equivalence": {"answer_column": "ref", "model": "m"}}
    rewards = build_plugin_set(plugins).reward_functions()
    assert {r.name: dict(r.columns or {}) for _, r in rewards} == {
        "code-tests": {"tests_column": "cases"},
        "judge-equivalence": {"answer_column": "ref"},
    }


def test_the_configuration_docs_gsm8k_train_math_eval_example_loads_each_split_with_its_own_columns(
    tmp_path, monkeypatch
):
    """docs/configuration.md's data block (train on GSM8K rows, evaluate on MATH-style rows), loaded as written:
    ``data.eval.columns`` maps the eval split's own column names."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = next(b.split("```", 1)[0] for b in docs.split("```yaml\n")[1:] if "minerva_math" in b)
    (tmp_path / "shared" / "data" / "gsm8k").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "eval").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "gsm8k" / "train.jsonl").write_text(
        json.dumps({"question": "Tom has 2 and gets 3. How many?", "answer": "2 + 3 = 5\n#### 5"}) + "\n"
    )
    (tmp_path / "shared" / "data" / "eval" / "minerva_math.jsonl").write_text(
        json.dumps({"problem": "What is $6 \\cdot 7$?", "solution": "It is $\\boxed{42}$."}) + "\n"
    )
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    config_text = "model: {tiny: {}}\nplugins: {r1-accuracy: {}}\n" + block
    (tmp_path / "work" / "c.yaml").write_text(config_text)
    config = load_config(tmp_path / "work" / "c.yaml")
    [train] = load_rows(config, "train")
    [evaluated] = load_rows(config, "eval")
    assert (train["prompt"], train["answer"]) == ("Tom has 2 and gets 3. How many?", "5")
    assert (evaluated["prompt"], evaluated["answer"]) == ("What is $6 \\cdot 7$?", "42")


def test_a_split_without_its_own_columns_takes_data_columns_and_an_empty_mapping_maps_nothing(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"q": "x", "prompt": "p", "answer": "1"}) + "\n")
    base = {"model": {"tiny": {}}, "plugins": {"r1-accuracy": {}}, "output_dir": str(tmp_path / "out")}
    data = {"train": {"source": "jsonl", "path": "a.jsonl"}, "columns": {"prompt": "q"}}
    data["eval"] = {"source": "jsonl", "path": "a.jsonl", "columns": {}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**base, "data": data}))
    config = load_config(tmp_path / "c.yaml")
    assert load_rows(config, "train")[0]["prompt"] == "x"
    assert load_rows(config, "eval")[0]["prompt"] == "p"


def test_rlvr_score_refuses_completions_without_the_column_a_reward_reads(tmp_path, capsys):
    path = write_config(tmp_path, SOLUTION_ROWS)
    completions = tmp_path / "completions.jsonl"
    completions.write_text("".join(json.dumps({**r, "completion": "<answer>2</answer>"}) + "\n" for r in SOLUTION_ROWS))
    assert cli.main(["score", str(path), str(completions)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "rlvr: error: reward 'r1-accuracy' (plugin 'r1-accuracy') reads column 'answer' (option answer_column), "
        f"which no row of the completions split ({completions}) has"
    ) and err.endswith("did you mean answer_column: solution (--set plugins.r1-accuracy.answer_column=solution)?\n")


def test_an_eval_split_must_suit_the_accuracy_reward_and_is_warned_about_for_the_others(tmp_path, caplog):
    math_rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+3=", "answer": "5"}]
    path = write_config(tmp_path, math_rows, {"r1-accuracy": {}, "code-tests": {}})
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in math_rows))
    config = load_config(path, ["data.eval={source: jsonl, path: eval.jsonl}", "eval.reward=r1-accuracy"])
    plugin_set = build_plugin_set(config["plugins"])
    with pytest.raises(
        DataError,
        match=r"reward 'code-tests' .* reads column 'tests' \(option tests_column\), which "
        r"no row of the train split .* the run would train without it",
    ):
        load_rows(config, "train", plugin_set)
    with caplog.at_level("WARNING"):
        assert len(load_rows(config, "eval", plugin_set)) == 2  # a math-only eval split of mixed training data
    assert [m for m in messages(caplog) if "reads column 'tests'" in m and "it would score none of them" in m]
    config = load_config(path, ["data.eval={source: jsonl, path: eval.jsonl}", "eval.reward=code-tests"])
    with pytest.raises(
        DataError,
        match=r"reward 'code-tests' .* which no row of the eval split .* has: it would "
        r"apply to no item and it would score none of them",
    ):
        load_rows(config, "eval", build_plugin_set(config["plugins"]))
