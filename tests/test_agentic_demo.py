"""The agentic demo's pieces: the problems and the teacher, the calculator, the chat template
(render → parse gives the call back; TRL's checks pass) and the SFT mask on tool results."""

import random

import pytest
from trl.chat_template_utils import (
    is_chat_template_prefix_preserving,
    is_chat_template_stop_token_trained,
    parse_response,
    supports_tool_calling,
)

from rlvr_plugins.builtin.calculator import CalculatorTool
from rlvr_plugins.demo.agentic import (
    agent_problem,
    agent_problems,
    agent_train_eval,
    build_agent_tokenizer,
    called_tool,
    slipped,
    tool_call,
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_agent_tokenizer()


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_teacher_episode_and_in_head_answer():
    rng = random.Random(0)
    tool = agent_problem(37, "*", 482, use_tool=True, slip=True, rng=rng)
    assert tool["prompt"] == [{"role": "user", "content": "37*482="}]
    assert tool["answer"] == "17834" and tool["difficulty"] == 3 and tool["teacher_tool"]
    assert tool["completion"] == [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("37*482")]},
        {"role": "tool", "name": "calculate", "content": "17834"},
        {"role": "assistant", "content": "<answer>17834</answer>"},
    ]
    assert called_tool(tool["completion"])
    head = agent_problem(37, "*", 482, use_tool=False, slip=False, rng=rng)
    assert head["completion"] == [{"role": "assistant", "content": "<answer>17834</answer>"}]
    assert not called_tool(head["completion"])
    wrong = agent_problem(37, "*", 482, use_tool=False, slip=True, rng=rng)["completion"][0]["content"]
    said = wrong.removeprefix("<answer>").removesuffix("</answer>")
    assert len(said) == 5 and sum(a != b for a, b in zip(said, "17834")) == 1  # one digit wrong


def test_slip_changes_exactly_one_digit_never_to_a_leading_zero():
    rng = random.Random(1)
    for value in (7, 10, 90, 17834, 100000):
        for _ in range(50):
            s = slipped(value, rng)
            a, b = str(value), str(s)
            assert len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1


def test_problems_shares_determinism_and_disjoint_split():
    train, held_out = agent_train_eval(4000, 400, 0, min_digits=2, max_digits=3, tool_rate=0.3, slip=0.5)
    assert agent_train_eval(4000, 400, 0, min_digits=2, max_digits=3, tool_rate=0.3, slip=0.5) == (train, held_out)
    assert not {r["prompt"][0]["content"] for r in train} & {r["prompt"][0]["content"] for r in held_out}
    assert len({r["prompt"][0]["content"] for r in held_out}) == 400
    for row in train[:200]:
        a, b = map(int, row["prompt"][0]["content"].removesuffix("=").split("*"))
        assert row["answer"] == str(a * b) and row["difficulty"] == max(len(str(a)), len(str(b))) in (2, 3)
    assert 0.27 < sum(r["teacher_tool"] for r in train) / len(train) < 0.33
    head = [r for r in train if not r["teacher_tool"]]
    wrong = [r for r in head if r["completion"][0]["content"] != f"<answer>{r['answer']}</answer>"]
    assert 0.46 < len(wrong) / len(head) < 0.54
    # the problems do not depend on the teacher's shares
    other, _ = agent_train_eval(4000, 400, 0, min_digits=2, max_digits=3, tool_rate=0.9, slip=0.0)
    assert [r["prompt"] for r in other] == [r["prompt"] for r in train]


def test_problem_options_are_checked():
    with pytest.raises(TypeError, match="unknown agent task options: \\['tool_share'\\]"):
        agent_problems(1, 0, tool_share=0.5)
    with pytest.raises(ValueError, match="ops must be made of"):
        agent_problems(1, 0, ops="/")
    with pytest.raises(ValueError, match="min_digits"):
        agent_problems(1, 0, min_digits=3, max_digits=2)


def test_template_round_trip_gives_the_call_back(tokenizer):
    row = agent_problem(37, "*", 482, use_tool=True, slip=False, rng=random.Random(0))
    messages = row["prompt"] + row["completion"]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert text == (
        "<bos>37*482=<|assistant|><tool_call>calculate:expression=37*482</tool_call><eos>"
        "<tool_response>17834</tool_response><|assistant|><answer>17834</answer><eos>"
    )
    prompt = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)
    first = tokenizer.apply_chat_template(messages[:2], tokenize=True, return_dict=False)
    assert first[: len(prompt)] == prompt
    tools = [CalculatorTool().calculate]  # the built-in calculator environment's tool
    assert parse_response(tokenizer, first[len(prompt) :], prefix=prompt, tools=tools) == {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("37*482")],
    }
    before_answer = tokenizer.apply_chat_template(
        messages[:3], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    full = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    assert full[: len(before_answer)] == before_answer
    assert parse_response(tokenizer, full[len(before_answer) :], prefix=before_answer) == {
        "role": "assistant",
        "content": "<answer>17834</answer>",
    }
    # any tool name and several arguments survive the round trip too
    call = {"type": "function", "function": {"name": "lookup_2", "arguments": {"key": "a b", "n": "3"}}}
    one = tokenizer.apply_chat_template(
        [row["prompt"][0], {"role": "assistant", "content": "", "tool_calls": [call]}], tokenize=True, return_dict=False
    )
    assert parse_response(tokenizer, one[len(prompt) :], prefix=prompt)["tool_calls"] == [call]


def test_unparsable_call_is_plain_text(tokenizer):
    prompt = ids(tokenizer, "<bos>1*2=<|assistant|>")
    assert parse_response(tokenizer, ids(tokenizer, "<tool_call>?</tool_call><eos>"), prefix=prompt) == {
        "role": "assistant",
        "content": "<tool_call>?</tool_call>",
    }


def test_trl_accepts_the_template_for_tools_and_sft(tokenizer):
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)  # else TRL would swap in a template of its own
    assert is_chat_template_stop_token_trained(tokenizer)  # <eos> of each assistant turn is in the SFT loss
    markers = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<|assistant|>", "calculate"]
    assert all(len(ids(tokenizer, m)) == 1 for m in markers)


def test_sft_loss_leaves_tool_results_and_prompt_out(tmp_path, tokenizer):
    from rlvr_plugins.demo.model import build_tiny_model
    from rlvr_plugins.train.sft import run_sft
    from rlvr_plugins.train.validate import SFTSection

    rng = random.Random(0)
    rows = [
        agent_problem(37, "*", 482, use_tool=True, slip=False, rng=rng),
        agent_problem(12, "*", 34, use_tool=False, slip=False, rng=rng),
    ]
    model = build_tiny_model(tokenizer, seed=0, num_hidden_layers=1, hidden_size=32, intermediate_size=64)
    section = SFTSection(
        completion_column="completion",
        trl={"assistant_only_loss": True, "max_steps": 1, "per_device_train_batch_size": 2, "disable_tqdm": True},
    )
    trainer = run_sft(model, tokenizer, rows, section, tmp_path, seed=0, max_completion_length=40)
    example = trainer.train_dataset[0]
    trained = "".join(
        tokenizer.convert_ids_to_tokens([t for t, lab in zip(example["input_ids"], example["labels"]) if lab != -100])
    )
    assert trained == "<tool_call>calculate:expression=37*482</tool_call><eos><answer>17834</answer><eos>"
    labels = dict(zip(example["input_ids"], example["labels"]))
    assert all(lab == t for t, lab in labels.items() if lab != -100)
    head = trainer.train_dataset[1]
    trained = "".join(
        tokenizer.convert_ids_to_tokens([t for t, lab in zip(head["input_ids"], head["labels"]) if lab != -100])
    )
    assert trained == "<answer>408</answer><eos>"
