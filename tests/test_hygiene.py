"""Data hygiene in ``rlvr filter``: the multiple-choice and true/false detectors on hand-written
and real rows, n-gram decontamination against values computed by hand, the config checks, and
hygiene-only and hygiene-then-difficulty runs of the command."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from rlvr_plugins import cli
from rlvr_plugins.cli import filter_cmd
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.lab.hygiene import (
    EvalIndex,
    final_answer,
    multiple_choice_rule,
    ngrams,
    normalise_words,
    screen,
    true_false_rule,
)
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import reward_plugin_class, shared_data
from rlvr_plugins.train.config import load_config
from rlvr_plugins.train.sampling import Sample

DATA = shared_data()
needs_data = pytest.mark.skipif(DATA is None, reason="../shared/data is absent (set RLVR_SHARED_DATA)")
REPO = Path(__file__).resolve().parents[1]

# name: (file, prompt column, answer column)
SETS = {
    "gsm8k/train": ("gsm8k/train.jsonl", "question", "answer"),
    "gsm8k/test": ("gsm8k/test.jsonl", "question", "answer"),
    "amc23": ("eval/amc23.jsonl", "problem", "answer"),
    "aime24": ("eval/aime24.jsonl", "problem", "answer"),
    "minerva_math": ("eval/minerva_math.jsonl", "problem", "solution"),
    "olympiadbench": ("eval/olympiadbench.jsonl", "question", "final_answer"),
}


def shared_rows(name: str) -> list[dict]:
    path = DATA / SETS[name][0]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rule_of(verdict) -> str | None:
    return None if verdict is None else verdict.rule


# ---------------------------------------------------------------- multiple choice, hand-written rows


@pytest.mark.parametrize(
    "prompt,answer,rule",
    [
        ("Which of the following numbers is prime?", "7", "which_of_the_following"),
        ("WHICH ONE OF THE FOLLOWING is even?", None, "which_of_the_following"),
        ("Compute 3+4. Answer Choices: 6, 7, 8", "7", "answer_choices"),
        ("Compute 3+4.\nOptions: 6, 7, 8", "7", "answer_choices"),
        ("Select the correct answer: 2+2 = ?", "4", "answer_choices"),
        ("What is 2+3?\n(A) 4\n(B) 5\n(C) 6", "5", "option_lines"),
        ("What is 2+3?\nA. 4\nB. 5", "5", "option_lines"),
        ("What is 2+3?\n  A) 4\n  B) 5", "5", "option_lines"),
        ("What is 2+3?\n**A.** 4\n**B.** 5", "5", "option_lines"),
        (r"What is $2+3$? $\textbf{(A) }4 \qquad \textbf{(B) }5 \qquad \textbf{(C) }6$", "5", "latex_options"),
        ("What is 2+3? (A) 4 (B) 5 (C) 6 (D) 7", "5", "inline_options"),
        ("What is 2+3? A. 4 B. 5 C. 6 D. 7", "5", "inline_options"),
        ("What is 2+3?", "B", "answer_is_option_letter"),
        ("What is 2+3?", "(B)", "answer_is_option_letter"),
        ("What is 2+3?", r"The answer is $\boxed{\textbf{(B)}}$.", "answer_is_option_letter"),
        ("What is 2+3?", "(B) 5", "answer_is_option_letter"),
    ],
)
def test_multiple_choice_rules_fire_on_their_form(prompt, answer, rule):
    verdict = multiple_choice_rule(prompt, answer)
    assert rule_of(verdict) == rule and verdict.category == "multiple_choice" and verdict.evidence


@pytest.mark.parametrize(
    "prompt,answer",
    [
        ("Point\nA. 5 units from the origin. How far is it from B?", "5"),  # one labelled line: a point
        ("The points are\nA: (0, 0)\nB: (1, 0)\nC: (0, 1). Find the area of ABC.", "0.5"),  # A: lists points
        ("A reaction has a pre-exponential (A) of 2. Boron (B) is added. Find k.", "3"),  # two labels, not options
        ("Triangle ABC has AB = 3. Let D be on BC. Find AD.", "2"),
        ("There are twice as many multiple choice problems as free response. How many are there?", "4"),
        ("Find x. (A note: x > 0.)", "3"),
        ("What is 2+3?", "5"),
        ("Find the constant.", "C + 1"),  # a letter in an expression is not an option
    ],
)
def test_multiple_choice_rules_do_not_fire_on_labels_that_are_not_options(prompt, answer):
    assert multiple_choice_rule(prompt, answer) is None


# ---------------------------------------------------------------- true/false, hand-written rows


@pytest.mark.parametrize(
    "prompt,answer,rule",
    [
        ("Is 91 prime?", "No", "answer_is_truth_value"),
        (
            "Is 97 prime?",
            r"Checking divisors up to 9, none divides 97, so \boxed{\text{Yes}}.",
            "answer_is_truth_value",
        ),
        ("Every prime is odd.", "False", "answer_is_truth_value"),
        ("Can 10 be written as a sum of two primes?", "3 + 7 = 10\n#### yes", "answer_is_truth_value"),
        ("True or false: every prime is odd.", None, "true_or_false_phrase"),
        ("Every prime is odd (true/false)?", None, "true_or_false_phrase"),
        ("Every prime is odd. True or false?", None, "true_or_false_phrase"),
        ("Determine whether the statement 2 > 1 is true or false.", None, "true_or_false_phrase"),
        ("Is it true that 2^10 > 1000?", None, "is_it_true_that"),
        ("Is the following statement true: 7 divides 49.", None, "is_it_true_that"),
        ("Is 49 a square? Answer yes or no.", None, "yes_or_no_phrase"),
        ("Is 49 a square (yes/no)", None, "yes_or_no_phrase"),
    ],
)
def test_true_false_rules_fire_on_their_form(prompt, answer, rule):
    verdict = true_false_rule(prompt, answer)
    assert rule_of(verdict) == rule and verdict.category == "true_false"


@pytest.mark.parametrize(
    "prompt,answer",
    [
        # GSM8K train: true/false questions counted in a word problem
        (
            (
                "There are twice as many multiple choice problems as free response, and 7 more free response than "
                "true/false.  How many true/false questions are there?"
            ),
            "x=6 true/false questions\n#### 6",
        ),
        # Minerva: a sub-problem answered "Yes" inside the prompt; this row's answer is a number
        (
            (
                "Subproblem 0: Is an energy level allowed?\nSolution: The answer is \\boxed{Yes}.\n\nSubproblem 1: If your "
                "answer is yes, determine its principal quantum number $(n)$."
            ),
            "n = \\boxed{4}.",
        ),
        # OlympiadBench: "the following statement is true" as part of the question
        ("Find the largest possible integer $k$, such that the following statement is true: ...", ["$2$"]),
        ("If 83% of the guests RSVP with a Yes response, how many guests did not respond?", "16"),
        ("Is 91 prime? Explain.", "No, 91 = 7 * 13, so it is not prime."),  # an explanation, not a bare truth value
    ],
)
def test_true_false_rules_do_not_fire_on_mentions(prompt, answer):
    assert true_false_rule(prompt, answer) is None


@pytest.mark.parametrize(
    "answer,final",
    [
        (r"so the answer is $\boxed{\text{(C)}}$.", "(C)"),
        ("4 + 4 = 8\n#### 8", "8"),
        (["$\\frac{1}{2}$", "x"], "\\frac{1}{2}"),
        (27.0, "27.0"),
        (None, None),
        ([], None),
        (" Yes. ", "Yes"),
    ],
)
def test_final_answer_takes_the_boxed_or_gsm8k_part_without_wrappers(answer, final):
    assert final_answer(answer) == final


# ---------------------------------------------------------------- the detectors on the shared data


@needs_data
@pytest.mark.parametrize("name", sorted(SETS))
def test_no_row_of_the_shared_sets_is_flagged(name):
    """Read by hand (docs/data-hygiene.md): the sets hold no multiple-choice or true/false
    problem. Their near misses, which must not fire: GSM8K rows that count true/false
    questions, Minerva's "(A)" pre-exponential and "(B)" boron, a Minerva sub-problem answered
    "Yes" in the prompt, OlympiadBench's "such that the following statement is true"."""
    _, column, answer = SETS[name]
    flagged = [
        (i, v.rule)
        for i, row in enumerate(shared_rows(name))
        for v in (multiple_choice_rule(row[column], row.get(answer)), true_false_rule(row[column], row.get(answer)))
        if v
    ]
    assert flagged == []


@needs_data
def test_real_problems_written_as_multiple_choice_or_true_false_are_caught():
    amc = shared_rows("amc23")[:10]
    letters = "ABCDE"
    for row in amc:
        value = int(row["answer"])
        options = [value - 4 + k for k in range(5)]  # the answer is option E
        typeset = " \\qquad ".join(f"\\textbf{{({letters[k]}) }}{o}" for k, o in enumerate(options))
        assert rule_of(multiple_choice_rule(f"{row['problem']}\n\n${typeset}$", "E")) == "latex_options"
        lines = "\n".join(f"({letters[k]}) {o}" for k, o in enumerate(options))
        assert rule_of(multiple_choice_rule(f"{row['problem']}\n{lines}", str(value))) == "option_lines"
        assert rule_of(multiple_choice_rule(row["problem"], "E")) == "answer_is_option_letter"
    gsm8k = shared_rows("gsm8k/test")[:10]
    for row in gsm8k:
        value = row["answer"].rsplit("####", 1)[1].strip()
        statement = f"True or false: the answer to this problem is {value}.\n{row['question']}"
        assert rule_of(true_false_rule(statement)) == "true_or_false_phrase"
        assert rule_of(true_false_rule(row["question"], "True")) == "answer_is_truth_value"
    minerva = shared_rows("minerva_math")
    energy = next(r for r in minerva if "\\boxed{Yes}" in r["problem"])
    sub_problem = energy["problem"].split("\n\n\nSolution:")[0].replace("Subproblem 0: ", "")
    assert rule_of(true_false_rule(sub_problem, "Yes")) == "answer_is_truth_value"


# ---------------------------------------------------------------- decontamination


def test_normalised_words_ignore_case_punctuation_latex_and_spacing():
    assert normalise_words("Janet’s ducks,  LAY\n16 eggs!") == ["janet", "s", "ducks", "lay", "16", "eggs"]
    assert normalise_words(r"Find $\frac{a}{b}$ if $a=\mathrm{3}$.") == ["find", "a", "b", "if", "a", "3"]
    assert normalise_words([{"role": "user", "content": "Hi there"}]) == ["hi", "there"]


def test_ngrams_are_distinct_and_empty_for_short_texts():
    assert ngrams(["a", "b", "a", "b"], 2) == {("a", "b"), ("b", "a")}
    assert ngrams(["a", "b"], 3) == set()


def test_overlap_is_the_share_of_the_training_prompts_ngrams_found_in_any_eval_prompt():
    index = EvalIndex({"one": ["the cat sat on the mat"], "two": ["a dog ran on the rug"]}, n=3)
    # training 3-grams: (a cat sat) (cat sat on) (sat on the) (on the rug): "one" holds the 2nd and
    # 3rd, "two" holds the 4th, so 3 of 4 are found; "one" shares the most (2)
    found = index.overlap("A cat sat on the rug")
    assert (found.grams, found.shared, found.overlap) == (4, 3, 0.75)
    assert (found.eval_set, found.eval_row, found.eval_shared, found.n) == ("one", 0, 2, 3)
    assert index.overlap("A  CAT, sat on... the mat!").overlap == 3 / 4  # (a cat sat) is not in "one"
    assert index.overlap("nothing in common here at all").overlap == 0.0
    assert index.overlap("cat sat").grams == 0  # fewer words than n, no short_n: not measured


def test_short_prompts_are_measured_with_short_n_grams():
    index = EvalIndex({"e": ["the cat sat on the mat today"]}, n=5, short_n=2)
    found = index.overlap("the cat ran")  # 3 words < 5: 2-grams (the cat) (cat ran); 1 of 2 found
    assert (found.n, found.grams, found.shared, found.overlap) == (2, 2, 1, 0.5)
    assert index.overlap("the cat sat on the mat").n == 5
    with pytest.raises(ValueError, match="short_n < n"):
        EvalIndex({"e": []}, n=5, short_n=5)


def test_a_tie_between_eval_rows_names_the_first():
    index = EvalIndex({"x": ["p q r"], "y": ["p q r", "q r s"]}, n=2)
    found = index.overlap("p q r s")
    assert (found.eval_set, found.eval_row, found.eval_shared, found.shared) == ("x", 0, 2, 3)


def test_screen_drops_by_the_first_check_that_fires():
    index = EvalIndex({"e": ["how many apples does tom have left after lunch"]}, n=4)
    rows = [
        {"prompt": "Which of the following is 3? Is it true that 3 = 3?", "answer": "No"},
        {"prompt": "Is it true that 3 = 3?", "answer": "3"},
        {"prompt": "So how many apples does Tom have left?", "answer": "2"},
        {"prompt": "How many pears does Ann eat?", "answer": "2"},
    ]
    records, overlaps = screen(rows, index=index, threshold=0.5)
    assert [r and r["rule"] for r in records] == ["which_of_the_following", "is_it_true_that", "ngram_overlap", None]
    # "so how many apples does tom have left": 4-grams (so how many apples) no, the next 4 yes
    assert records[2]["overlap"] == 0.8 and records[2]["eval_row"] == 0
    assert overlaps[:2] == [None, None] and overlaps[3].overlap == 0.0  # not measured once a detector drops
    assert screen(rows, multiple_choice=False, true_false=False) == ([None] * 4, [None] * 4)
    records, overlaps = screen(rows, index=index, threshold=0.8)
    assert records[2] is None and overlaps[2].overlap == 0.8  # dropped only above the threshold


@needs_data
def test_a_reformatted_gsm8k_test_prompt_in_the_train_set_is_dropped_and_train_rows_are_kept():
    test = [r["question"] for r in shared_rows("gsm8k/test")]
    index = EvalIndex({"gsm8k/test": test}, n=13)
    original = test[0]
    copied = "  ".join(original.upper().replace(".", " .").replace("$", "$ ").split(" "))
    copied = copied.replace("?", "??").replace("’", "'")
    found = index.overlap(copied)
    assert found.overlap == 1.0 and (found.eval_set, found.eval_row) == ("gsm8k/test", 0)
    train = [r["question"] for r in shared_rows("gsm8k/train")[:300]]
    overlapping = [i for i, prompt in enumerate(train) if index.overlap(prompt).shared]
    assert overlapping == [20]  # Bella's stamps: the same template as test row 632 (checked by hand)


@needs_data
def test_gsm8k_train_against_every_eval_set_takes_seconds():
    evals = {name: [r[SETS[name][1]] for r in shared_rows(name)] for name in SETS if name != "gsm8k/train"}
    started = time.perf_counter()
    index = EvalIndex(evals, n=13)
    found = [index.overlap(r["question"]) for r in shared_rows("gsm8k/train")]
    seconds = time.perf_counter() - started
    dropped = sorted(i for i, f in enumerate(found) if f.overlap > 0)
    assert dropped == [20, 406, 1314, 5162]  # measured once by hand: docs/data-hygiene.md
    assert seconds < 30, f"decontaminating GSM8K train took {seconds:.1f}s"


# ---------------------------------------------------------------- config


def write_config(
    tmp_path: Path, filter_section: dict, rows: list[dict] | None = None, plugins=None, model: dict | None = None
) -> Path:
    """A filter config on ``rows``; no ``model`` section unless one is given (hygiene needs none)."""
    rows = rows if rows is not None else ROWS
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "run"),
                "seed": 0,
                **({"model": model} if model else {}),
                "data": {"train": {"source": "jsonl", "path": str(data)}, "columns": {"prompt": "question"}},
                "plugins": plugins or {},
                "engine": {"in_process": True},
                "filter": filter_section,
            }
        )
    )
    return path


def test_difficulty_filtering_without_a_model_section_names_what_to_do(tmp_path, capsys):
    path = write_config(tmp_path, {"n": 2}, plugins={"r1-accuracy": {}})
    assert cli.main(["filter", str(path)]) == 2
    err = capsys.readouterr().err
    assert "filter.difficulty samples every prompt with the model" in err and "difficulty: false" in err


def test_the_hygiene_section_is_validated_with_every_problem_in_one_error(tmp_path):
    path = write_config(
        tmp_path,
        {
            "difficulty": "no",
            "hygiene": {
                "drop_multiple_choice": "yes",
                "examples": -1,
                "drop_tf": True,
                "decontaminate": {
                    "eval_sets": ["missing.jsonl", {"path": "rows.jsonl", "colum": "q"}, 3],
                    "n": 0,
                    "short_n": 8,
                    "threshold": 1.5,
                },
            },
        },
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    for expected in [
        "filter.difficulty must be true or false, got 'no'",
        "filter.hygiene.drop_multiple_choice must be true or false, got 'yes'",
        "filter.hygiene.examples must be an integer >= 0, got -1",
        "unknown key in filter.hygiene 'drop_tf'; did you mean drop_true_false",
        "filter.hygiene.decontaminate.n must be an integer >= 1 (words per n-gram), got 0",
        "filter.hygiene.decontaminate.threshold must be a number in [0, 1)",
        "filter.hygiene.decontaminate.eval_sets[0]: eval set file 'missing.jsonl' does not exist",
        "unknown key in filter.hygiene.decontaminate.eval_sets[1] 'colum'; did you mean column",
        "filter.hygiene.decontaminate.eval_sets[2] must be a JSONL path",
    ]:
        assert expected in message, message


def test_decontamination_needs_eval_sets_and_short_n_below_n(tmp_path):
    path = write_config(tmp_path, {"hygiene": {"decontaminate": {"n": 8, "short_n": 8}}})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "filter.hygiene.decontaminate.short_n must be an integer >= 1 and smaller than n=8, got 8" in str(
        caught.value
    )
    assert "filter.hygiene.decontaminate.eval_sets must be a non-empty list" in str(caught.value)
    path = write_config(tmp_path, {"hygiene": {"decontaminate": {"eval_sets": ["data.eval"]}}})
    with pytest.raises(ConfigError, match=r"eval_sets\[0\] is 'data.eval' but the config has no data.eval"):
        load_config(path)


def test_difficulty_off_without_hygiene_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="nothing to filter"):
        load_config(write_config(tmp_path, {"difficulty": False}))


def test_the_hygiene_keys_are_documented():
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    from rlvr_plugins.train import sections

    keys = {
        f.name
        for cls in (sections.HygieneSection, sections.DecontaminateSection, sections.EvalSetSection)
        for f in dataclasses.fields(cls)
    } | {"difficulty", "hygiene"}
    assert not sorted(k for k in keys if f"`{k}" not in text)
    assert "data-hygiene.md" in text


# ---------------------------------------------------------------- rlvr filter


ROWS = [
    {"question": "What is 2+3?\n(A) 4\n(B) 5\n(C) 6", "answer": "5", "kind": "mc"},
    {
        "question": "Tom has 3 apples and eats one at lunch. How many apples does Tom have left after lunch today?",
        "answer": "2",
        "kind": "contaminated",
    },
    {"question": "Is 91 prime?", "answer": "No", "kind": "tf"},
    {"question": "Ann has 4 pears. She buys 5 more. How many pears does she have?", "answer": "9", "kind": "clean"},
    {"question": "A box holds 6 eggs. How many eggs are in 7 boxes?", "answer": "42", "kind": "clean"},
    {"question": "Compute 6 * 7.", "answer": "42", "kind": "short"},
]
EVAL = [{"problem": "tom has 3 apples and eats one at lunch: how many apples does tom have left"}]


def hygiene_setup(tmp_path: Path, **options) -> Path:
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in EVAL))
    hygiene = {
        "decontaminate": {"eval_sets": [{"path": "eval.jsonl", "name": "toy-eval"}], "n": 8, "threshold": 0.5},
        "examples": 1,
    }
    return write_config(tmp_path, {"difficulty": False, "hygiene": hygiene, **options})


def test_hygiene_only_filter_runs_without_a_model_and_writes_the_reports(tmp_path, monkeypatch, capsys):
    def no_model(*args, **kwargs):
        raise AssertionError("a hygiene-only run must not sample")

    monkeypatch.setattr(filter_cmd, "sample_rows", no_model)
    path = hygiene_setup(tmp_path)
    assert cli.main(["filter", str(path)]) == 0
    out = tmp_path / "run"
    kept = [json.loads(line) for line in (out / "filtered.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in kept] == ["clean", "clean", "short"] and "pass_rate" not in kept[0]
    dropped = [json.loads(line) for line in (out / "dropped.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["drop"]["reason"], r["drop"]["rule"]) for r in dropped] == [
        ("mc", "multiple_choice", "option_lines"),
        ("contaminated", "contaminated", "ngram_overlap"),
        ("tf", "true_false", "answer_is_truth_value"),
    ]
    # 19 words, 12 distinct 8-grams; the eval prompt is its first 16 words, which hold the first 9
    record = dropped[1]["drop"]
    assert (record["grams"], record["shared"], record["overlap"]) == (12, 9, 0.75)
    assert (record["eval_set"], record["eval_row"], record["stage"]) == ("toy-eval", 0, "hygiene")
    report = json.loads((out / "filter_report.json").read_text())
    assert (report["prompts"], report["kept"], report["difficulty"]) == (6, 3, "skipped (filter.difficulty: false)")
    hyg = report["hygiene"]
    assert hyg["dropped"] == {"multiple_choice": 1, "true_false": 1, "contaminated": 1}
    assert hyg["by_rule"] == {"answer_is_truth_value": 1, "ngram_overlap": 1, "option_lines": 1}
    assert hyg["examples"]["option_lines"][0]["row"] == 0
    assert hyg["decontamination"]["eval_sets"]["toy-eval"]["prompts"] == 1
    assert hyg["decontamination"]["dropped_per_eval_set"] == {"toy-eval": 1}
    # "Compute 6 * 7." (3 words) has no 8-gram; the two clean rows share none with the eval prompt;
    # "Is 91 prime?" is dropped as true/false before it is measured
    assert hyg["decontamination"]["not_measured_too_short"] == 1
    assert hyg["decontamination"]["kept_with_overlap"] == 0
    markdown = (out / "filter_report.md").read_text()
    assert "Kept **3** of 6 prompts." in markdown and "| contaminated | 1 |" in markdown
    assert "overlap 0.75 with `toy-eval` row 0" in markdown and "| `option_lines` | 1 |" in markdown
    assert "kept 3 of 6 prompts" in capsys.readouterr().out


def test_an_eval_set_without_a_prompt_column_names_the_file_and_the_columns(tmp_path, capsys):
    path = hygiene_setup(tmp_path)
    (tmp_path / "eval.jsonl").write_text(json.dumps({"text": "x"}) + "\n")
    assert cli.main(["filter", str(path)]) != 0
    err = capsys.readouterr().err
    assert "eval set 'eval.jsonl': row 0 has no 'prompt' column; columns present: ['text']" in err


class Solved:
    def __call__(self, *, prompt, completion, example):
        return float(example["kind"] == "clean" and completion == "ok")


SolvedPlugin = reward_plugin_class("solved-toy", Solved(), reward_name="solved", isolated=False)


def test_hygiene_runs_before_the_difficulty_sampling(tmp_path, monkeypatch):
    """Only the prompts hygiene keeps are sampled; the sampler is scripted (one "ok" of two)."""
    sampled = []

    def scripted(config, ctx, rows, options, desc):
        sampled.extend(r["prompt"] for r in rows)
        return None, None, [r["prompt"] for r in rows], [[Sample("ok", 1), Sample("no", 1)] for _ in rows]

    monkeypatch.setattr(filter_cmd, "sample_rows", scripted)
    path = hygiene_setup(tmp_path, difficulty=True, n=2)
    spec = yaml.safe_load(path.read_text())
    spec["plugins"] = {"solved-toy": {}}
    spec["model"] = {"tiny": {}}  # difficulty sampling needs one (the sampler is scripted here)
    path.write_text(yaml.safe_dump(spec))
    with temporary_plugin(SolvedPlugin):
        assert cli.main(["filter", str(path)]) == 0
    assert sampled == [row["question"] for row in ROWS[3:]]
    report = json.loads((tmp_path / "run" / "filter_report.json").read_text())
    assert (report["prompts"], report["sampled"], report["kept"]) == (6, 3, 2)
    assert report["hygiene"]["kept"] == 3 and report["pass_count_histogram"] == {"0": 1, "1": 2}
    assert report["dropped"]["never_solved"] == 1  # the short row: the toy reward solves only "clean" rows
    dropped = [json.loads(line) for line in (tmp_path / "run" / "dropped.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["drop"]["stage"], r["drop"]["reason"]) for r in dropped][-1] == (
        "short",
        "difficulty",
        "never_solved",
    )
    kept = [json.loads(line) for line in (tmp_path / "run" / "filtered.jsonl").read_text().splitlines()]
    assert [r["pass_rate"] for r in kept] == [0.5, 0.5]
    assert re.search(r"## Difficulty", (tmp_path / "run" / "filter_report.md").read_text())


def test_final_answer_unwraps_in_one_linear_pass():
    from rlvr_plugins.testing import adversarial_texts, time_each

    assert final_answer(r"\textbf{\text{(B)}} or \text{\frac{1}{2}}") == r"(B) or \text{\frac{1}{2}}"
    assert final_answer(r"\boxed{\mathrm{\text{Yes}}}.") == "Yes"
    out = time_each(final_answer, adversarial_texts(1_000_000), limit_s=2.0)
    assert out["nested_text"][0] == "x"
    assert out["hash_then_spaces"][0] == "x"
    assert out["box_then_braces"][0] == "\\boxed{" + "{" * 1_000_000


def test_the_detectors_are_linear_on_adversarial_prompts():
    """100 KB (prompts, not completions); the old phrase pattern took minutes on the newlines."""
    from rlvr_plugins.lab.hygiene import multiple_choice_rule, true_false_rule
    from rlvr_plugins.testing import adversarial_texts, time_each

    texts = {**adversarial_texts(100_000), "newlines_then_phrase": "\n" * 100_000 + "True or false: 2 is odd."}
    tf = time_each(lambda text: true_false_rule(text), texts, limit_s=1.0)
    assert {name: (v.rule, v.evidence) for name, (v, _) in tf.items() if v} == {
        "newlines_then_phrase": ("true_or_false_phrase", "True or false")
    }
    mc = time_each(lambda text: multiple_choice_rule(text), texts, limit_s=1.0)
    assert {name for name, (v, _) in mc.items() if v} == set()
