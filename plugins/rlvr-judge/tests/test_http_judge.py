"""The HTTP judge against a stub OpenAI-compatible server on loopback: replies, timeouts, garbage, retries, down."""

import time

import pytest

from conftest import chat_reply
from rlvr_judge import JudgeError, JudgeReplyError, JudgeUnavailable
from rlvr_judge.judges import HttpJudge, check_template, parse_verdict, render_prompt

PROMPT_YES = "Reference answer: 50 cm\nFinal answer: 0.5 metres\n"
PROMPT_NO = "Reference answer: 50 cm\nFinal answer: 5 metres\n"


def judge(url, **kw):
    return HttpJudge(url, "judge-model", **{"timeout_s": 1.0, "retries": 2, "backoff_s": 0.05, **kw})


def test_request_is_openai_chat_completions_at_temperature_zero(stub, monkeypatch):
    monkeypatch.setenv("STUB_JUDGE_KEY", "sk-test")
    assert judge(stub.base_url, api_key_env="STUB_JUDGE_KEY", max_tokens=64).judge(PROMPT_YES) is True
    assert judge(stub.base_url).judge(PROMPT_NO) is False
    first, second = stub.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["body"] == {
        "model": "judge-model",
        "messages": [{"role": "user", "content": PROMPT_YES}],
        "max_tokens": 64,
        "temperature": 0,
    }
    assert first["headers"]["Authorization"] == "Bearer sk-test"
    assert "Authorization" not in second["headers"]


def test_missing_key_variable_raises_before_any_request(stub, monkeypatch):
    monkeypatch.delenv("STUB_JUDGE_KEY", raising=False)
    with pytest.raises(JudgeError, match="STUB_JUDGE_KEY"):
        judge(stub.base_url, api_key_env="STUB_JUDGE_KEY").judge(PROMPT_YES)
    assert stub.count == 0


def test_server_error_then_success_is_retried(stub):
    stub.script = [("status", 500), ("status", 503)]
    assert judge(stub.base_url).judge(PROMPT_YES) is True
    assert stub.count == 3


def test_server_errors_past_the_retries_raise_unavailable(stub):
    stub.default = ("status", 502)
    with pytest.raises(JudgeUnavailable, match=r"after 3 attempt\(s\).*HTTP 502"):
        judge(stub.base_url).judge(PROMPT_YES)
    assert stub.count == 3


def test_client_error_is_not_retried(stub):
    stub.default = ("status", 404)
    with pytest.raises(JudgeUnavailable, match="refused the request: HTTP 404"):
        judge(stub.base_url).judge(PROMPT_YES)
    assert stub.count == 1


def test_slow_reply_times_out_then_the_retry_answers(stub):
    stub.script = [("sleep", 3.0)]
    started = time.monotonic()
    assert judge(stub.base_url, timeout_s=0.5).judge(PROMPT_YES) is True
    assert stub.count == 2
    assert time.monotonic() - started < 2.5


def test_budget_bounds_the_time_spent_on_retries(stub):
    stub.default = ("sleep", 5.0)
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="timeout"):
        judge(stub.base_url, timeout_s=0.6, retries=10, budget_s=1.5).judge(PROMPT_YES)
    elapsed = time.monotonic() - started
    assert elapsed < 1.5 + 1.0, elapsed
    assert 2 <= stub.count <= 3  # 0.6 + 0.05 + 0.6 + 0.1 + (what is left of 1.5 s)


def test_server_down_raises_unavailable(dead_url):
    with pytest.raises(JudgeUnavailable, match="after 3 attempt"):
        judge(dead_url).judge(PROMPT_YES)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"message": {}}]}',
        b'{"choices": [{"message": {"content": null}}]}',
    ],
)
def test_malformed_reply_raises_and_is_not_retried(stub, raw):
    stub.default = ("raw", raw)
    with pytest.raises(JudgeReplyError, match="malformed"):
        judge(stub.base_url).judge(PROMPT_YES)
    assert stub.count == 1


@pytest.mark.parametrize(
    "content", ["", "I think they are the same.", "EQUIVALENT\nbut maybe not", "Verdict: EQUIVALENT", "EQUIVALENT?"]
)
def test_reply_without_a_verdict_line_raises(stub, content):
    stub.default = ("content", content)
    with pytest.raises(JudgeReplyError):
        judge(stub.base_url).judge(PROMPT_YES)


@pytest.mark.parametrize(
    "content, verdict",
    [
        ("EQUIVALENT", True),
        ("NOT EQUIVALENT", False),
        ("reasoning...\n\n  **Equivalent.**  \n", True),
        ("not   equivalent", False),
        ("The first says 5.\nNOT EQUIVALENT.", False),
    ],
)
def test_verdict_is_the_last_non_empty_line(content, verdict):
    assert parse_verdict(content) is verdict


def test_chat_reply_helper_round_trip(stub):
    stub.default = ("raw", chat_reply("NOT EQUIVALENT"))
    assert judge(stub.base_url).judge(PROMPT_YES) is False


def test_prompt_rendering_and_template_checks():
    template = "Q:{question_block}R={reference} A={answer}"
    assert render_prompt(template, answer="a", reference="r", question=None) == "Q:R=r A=a"
    assert render_prompt(template, answer="a", reference="r", question="why") == "Q:Question: why\nR=r A=a"
    assert render_prompt("{answer}{{x}}{reference}", answer="{0}", reference="}", question=None) == "{0}{x}}"
    assert check_template(template, include_question=True) == []
    assert check_template("{answer}", include_question=True) == [
        "template must contain {reference}",
        "include_question is true but the template has neither {question} nor {question_block}",
    ]
    assert "unknown placeholder {solution}" in check_template("{answer}{reference}{solution}", False)[0]
    assert "not a valid format string" in check_template("{answer", False)[0]
