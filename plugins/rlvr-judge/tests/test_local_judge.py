"""The local judge: the verdict from the next-token logits of a tiny model whose logits are set by hand."""

import math
import pickle

import pytest

from conftest import make_scorer
from rlvr_judge import JudgeError, judges
from rlvr_judge.judges import LocalJudge

pytestmark = pytest.mark.slow  # importing torch and transformers alone takes 10-30 s on a busy 2-core box

PROMPT = "Reference answer: 50 cm\nFinal answer: 0.5 metres\nReply with yes or no.\n"


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_verdict_follows_the_yes_and_no_logits(tiny_judges):
    yes, no = LocalJudge(tiny_judges["yes"]), LocalJudge(tiny_judges["no"])
    assert yes.p_yes(PROMPT) == pytest.approx(sigmoid(4.0), abs=1e-6)
    assert no.p_yes(PROMPT) == pytest.approx(sigmoid(-4.0), abs=1e-6)
    assert yes.judge(PROMPT) is True and no.judge(PROMPT) is False


def test_threshold(tiny_judges):
    path = tiny_judges["three_to_one"]  # logits ln 3 and 0: p_yes = 3 / (3 + 1)
    assert LocalJudge(path).p_yes(PROMPT) == pytest.approx(0.75, abs=1e-6)
    assert LocalJudge(path, threshold=0.7).judge(PROMPT) is True
    assert LocalJudge(path, threshold=0.8).judge(PROMPT) is False


def test_candidates_are_the_first_tokens_of_yes_and_no(tiny_judges):
    # swapping the words swaps the verdict: "no" is now the positive candidate
    assert LocalJudge(tiny_judges["yes"], yes_token="no", no_token="yes").p_yes(PROMPT) == pytest.approx(
        sigmoid(-4.0), abs=1e-6
    )
    with pytest.raises(JudgeError, match="must start with different tokens"):
        LocalJudge(tiny_judges["yes"], yes_token="yes", no_token="yeah").judge(PROMPT)


def test_model_is_loaded_once_per_process(tiny_judges, monkeypatch):
    judge = LocalJudge(tiny_judges["yes"], max_prompt_tokens=16)
    first = judge.load()
    assert LocalJudge(tiny_judges["yes"], threshold=0.9).load() is first
    assert str(first[1].device) == "cpu"
    monkeypatch.setattr(judges, "_LOADED", {})
    assert judge.load() is not first


def test_unpickling_the_scorer_loads_the_model(tiny_judges, monkeypatch):
    """A worker loads the model when it receives the scoring function, outside any item's deadline."""
    monkeypatch.setattr(judges, "_LOADED", {})
    scorer = make_scorer(backend="local", model=tiny_judges["no"])
    assert judges._LOADED == {}
    pickle.loads(pickle.dumps(scorer))
    assert list(judges._LOADED) == [(tiny_judges["no"], "cpu")]


def test_local_scorer_rules_then_judge(tiny_judges):
    yes = make_scorer(backend="local", model=tiny_judges["yes"])
    no = make_scorer(backend="local", model=tiny_judges["no"], include_question=True)
    example = {"answer": "50 cm"}
    assert yes(prompt="p", completion="<answer>0.5 metres</answer>", example=example) == 1.0
    assert no(prompt="How long?", completion="<answer>0.5 metres</answer>", example=example) == 0.0
    # rules first: the always-yes judge is not asked about two plain numbers that differ
    assert yes(prompt="p", completion="<answer>6</answer>", example={"answer": "5"}) == 0.0


def test_missing_model_fails_loudly(tmp_path):
    with pytest.raises(OSError):
        LocalJudge(str(tmp_path / "no-such-model")).load()


def test_local_judge_in_worker_processes(tiny_judges):
    """The worker loads the model when the scorer arrives (start-up limit), so a short item deadline holds."""
    from rlvr_plugins.engine import RewardEngine

    scorer = make_scorer(backend="local", model=tiny_judges["yes"])
    items = [
        {"prompt": "p", "completion": c, "example": {"answer": a}}
        for c, a in (("<answer>0.5 metres</answer>", "50 cm"), ("<answer>6</answer>", "5"), ("none", "5"))
    ]
    with RewardEngine(num_workers=1, timeout_s=5.0) as engine:
        result = engine.score("judge-equivalence", scorer, items)
    assert result.values == [1.0, 0.0, 0.0] and result.failed == [False] * 3, result.errors
