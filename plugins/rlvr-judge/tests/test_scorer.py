"""The reward: rules first, the judge only where they cannot decide, each pair judged once (memory and JSONL)."""

import json
import pickle

import pytest

from conftest import make_scorer
from rlvr_judge import JudgeReplyError, JudgeUnavailable
from rlvr_judge.plugins import _CACHES


def score(scorer, completion, answer, prompt="How long is it?", **example):
    return scorer(prompt=prompt, completion=completion, example={"answer": answer, **example})


def test_rules_decide_without_the_judge(stub):
    scorer = make_scorer(base_url=stub.base_url)
    assert score(scorer, "<answer>5</answer>", "5") == 1.0
    assert score(scorer, "<answer>6</answer>", "5") == 0.0
    assert score(scorer, "no answer here", "50 cm") == 0.0
    assert score(scorer, "<answer>0.5 metres or 5 metres</answer>", "50 cm") == 0.0  # sprayed
    assert stub.count == 0


def test_judge_decides_what_the_rules_cannot(stub):
    scorer = make_scorer(base_url=stub.base_url)
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert score(scorer, "<answer>5 metres</answer>", "50 cm") == 0.0
    assert score(scorer, "I think so. \\boxed{one half}", "The answer is $\\boxed{\\frac{1}{2}}$.") == 1.0
    assert stub.count == 3
    # the judge sees the extracted answer and the normalised reference, not the whole texts
    assert "Final answer: one half\n" in stub.requests[2]["body"]["messages"][0]["content"]
    assert "Reference answer: \\frac{1}{2}\n" in stub.requests[2]["body"]["messages"][0]["content"]


def test_row_without_reference_does_not_apply(stub):
    scorer = make_scorer(base_url=stub.base_url)
    assert scorer(prompt="p", completion="<answer>x</answer>", example={}) is None
    assert stub.count == 0


def test_repeated_pair_is_judged_once(stub):
    scorer = make_scorer(base_url=stub.base_url)
    for completion in [
        "<answer>0.5 metres</answer>",
        "<think>hm</think><answer> 0.5   metres </answer>",
        "\\boxed{0.5 metres}",
    ]:
        assert score(scorer, completion, "50 cm") == 1.0
    assert stub.count == 1


def test_question_is_part_of_the_prompt_and_of_the_key(stub):
    scorer = make_scorer(base_url=stub.base_url, include_question=True)
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt="How long is the rod?") == 1.0
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt="How long is the rod?") == 1.0
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How tall is the cat?"}]
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt=chat) == 1.0
    assert stub.count == 2
    prompts = [r["body"]["messages"][0]["content"] for r in stub.requests]
    assert "Question: How long is the rod?\n" in prompts[0]
    assert "Question: How tall is the cat?\n" in prompts[1] and "Be brief" not in prompts[1]


def test_question_column_overrides_the_prompt(stub):
    scorer = make_scorer(base_url=stub.base_url, include_question=True, question_column="problem")
    score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt="<template> rod", problem="Rod length?")
    assert "Question: Rod length?\n" in stub.requests[0]["body"]["messages"][0]["content"]


def test_question_keeps_its_lines_in_the_prompt(stub):
    scorer = make_scorer(base_url=stub.base_url, include_question=True)
    score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt="  A rod:\n$$x = 1$$\nHow long?\n")
    assert "Question: A rod:\n$$x = 1$$\nHow long?\n" in stub.requests[0]["body"]["messages"][0]["content"]


def test_missing_question_column_is_an_error_not_an_empty_question(stub):
    scorer = make_scorer(base_url=stub.base_url, include_question=True, question_column="problem")
    with pytest.raises(
        ValueError, match=r"question_column 'problem' is not a column of this row; columns: \['answer'\]"
    ):
        score(scorer, "<answer>0.5 metres</answer>", "50 cm")
    assert stub.count == 0


def test_without_include_question_no_question_is_sent(stub):
    scorer = make_scorer(base_url=stub.base_url)
    score(scorer, "<answer>0.5 metres</answer>", "50 cm", prompt="How long is the rod?")
    assert "rod" not in stub.requests[0]["body"]["messages"][0]["content"]


def test_custom_template(stub):
    template = "Reference answer: {reference}\nFinal answer: {answer}\nSay EQUIVALENT or NOT EQUIVALENT."
    scorer = make_scorer(base_url=stub.base_url, template=template)
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert stub.requests[0]["body"]["messages"][0]["content"] == (
        "Reference answer: 50 cm\nFinal answer: 0.5 metres\nSay EQUIVALENT or NOT EQUIVALENT."
    )


def test_judge_failures_raise_never_zero(stub, dead_url):
    stub.default = ("content", "Hmm, hard to say.")
    with pytest.raises(JudgeReplyError):
        score(make_scorer(base_url=stub.base_url), "<answer>0.5 metres</answer>", "50 cm")
    with pytest.raises(JudgeUnavailable):
        score(make_scorer(base_url=dead_url, retries=0), "<answer>0.5 metres</answer>", "50 cm")


def test_failures_are_not_cached(stub):
    scorer = make_scorer(base_url=stub.base_url, retries=0)
    stub.script = [("status", 500)]
    with pytest.raises(JudgeUnavailable):
        score(scorer, "<answer>0.5 metres</answer>", "50 cm")
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert stub.count == 2


def test_disk_cache_serves_a_fresh_process(stub, tmp_path):
    path = tmp_path / "verdicts.jsonl"
    scorer = make_scorer(base_url=stub.base_url, cache_path=str(path))
    assert score(scorer, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert score(scorer, "<answer>5 metres</answer>", "50 cm") == 0.0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["answer"], e["reference"], e["question"], e["equivalent"]) for e in lines] == [
        ("0.5 metres", "50 cm", None, True),
        ("5 metres", "50 cm", None, False),
    ]
    _CACHES.clear()  # what a new worker, or a new run, starts with
    fresh = pickle.loads(pickle.dumps(scorer))
    assert score(fresh, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert score(fresh, "<answer>5 metres</answer>", "50 cm") == 0.0
    assert stub.count == 2


def test_disk_cache_sees_lines_other_processes_append(stub, tmp_path):
    path = tmp_path / "verdicts.jsonl"
    scorer = make_scorer(base_url=stub.base_url, cache_path=str(path))
    assert score(scorer, "<answer>5 metres</answer>", "50 cm") == 0.0  # this process has read the file
    other = {
        "judge": scorer.fingerprint(),
        "answer": "half a metre",
        "reference": "50 cm",
        "question": None,
        "equivalent": True,
    }
    with path.open("a") as f:
        f.write('{"judge": "broken line, a worker killed mid-write"\n')
        f.write(json.dumps(other) + "\n")
        f.write('{"judge": "partial, no newline yet"')
    assert score(scorer, "<answer>half a metre</answer>", "50 cm") == 1.0
    assert stub.count == 1


def test_cached_verdicts_belong_to_one_judge(stub, tmp_path):
    path = str(tmp_path / "verdicts.jsonl")
    first = make_scorer(base_url=stub.base_url, cache_path=path)
    other_model = make_scorer(base_url=stub.base_url, cache_path=path, model="another-judge")
    other_template = make_scorer(
        base_url=stub.base_url, cache_path=path, template="Final answer: {answer}\nReference answer: {reference}\n"
    )
    same_judge_elsewhere = make_scorer(
        base_url=stub.base_url.replace("127.0.0.1", "localhost"), cache_path=path, timeout_s=2.0, retries=1
    )
    for scorer in (first, other_model, other_template, same_judge_elsewhere):
        assert score(scorer, "<answer>0.5 metres</answer>", "50 cm") == 1.0
    assert stub.count == 3
    assert same_judge_elsewhere.fingerprint() == first.fingerprint() != other_model.fingerprint()


def test_memory_holds_at_most_max_entries_oldest_dropped_first(tmp_path):
    from rlvr_judge.cache import VerdictCache, make_key

    cache = VerdictCache(str(tmp_path / "v.jsonl"), max_entries=2)
    keys = [make_key("j", f"answer {i}", "ref", None) for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, i % 2 == 0)
    assert list(cache.memory) == keys[1:]
    assert cache.get(keys[0]) is None  # dropped, and the file is not read again for it
    fresh = VerdictCache(str(tmp_path / "v.jsonl"), max_entries=2)
    assert fresh.get(keys[2]) is True and fresh.get(keys[1]) is False and list(fresh.memory) == keys[1:]
