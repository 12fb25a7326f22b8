"""Environments and tools on TRL's tool loop: the ``calculator`` tool, episodes of several turns driven by
scripted turns (a tiny model never writes a tool call by itself), what reaches the loss, the metrics, and
the refusals of ``RLVRTrainer`` and ``rlvr train --check``."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
import torch
from datasets import Dataset

from rlvr_plugins.builtin.calculator import calculate
from rlvr_plugins.episodes import UNPARSABLE_TOOL
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import grpo_args, reward_plugin_class, scripted_turns, tiny_model, tool_tokenizer
from rlvr_plugins.trainer import RLVRTrainer

# -- the calculator ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("(12 + 3.5) × 4", "62"),
        ("123456789 * 987654321", str(123456789 * 987654321)),
        ("7 / 2", "3.5"),
        ("-(2 − 5) * 1.10", "3.3"),
        ("84 ÷ 4 - 0.25", "20.75"),
        ("10 / 3", "3.3333333333333333333"),  # 20 significant digits
    ],
)
def test_calculator_is_exact(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("2 ** 8", "unsupported operation **"),
        ("7 % 2", "unsupported operation %"),
        ("__import__('os').system('true')", "unsupported element"),
        ("().__class__", "unsupported element"),
        ("1 / (2 - 2)", "division by zero"),
        ("1 +", "not an arithmetic expression"),
        ("(" * 500 + "1" + ")" * 500, "longer than 1000 characters"),
        ("1" * 101, "longer than 100 digits"),
        ("*".join(["9" * 60] * 2), "longer than 100 digits"),
    ],
)
def test_calculator_refuses_with_the_reason(expression, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        calculate(expression)


def test_calculator_big_int_guard_stops_a_product_before_it_is_computed():
    import time

    chain = "*".join(["9" * 99] * 400)  # 40,000 digits if it were multiplied out
    t = time.perf_counter()
    with pytest.raises(ValueError, match="longer than 100 digits"):
        calculate(chain[:999], max_digits=100)
    assert time.perf_counter() - t < 0.5
    assert Decimal(calculate("0.1 + 0.2")) == Decimal("0.3")


# -- episodes on TRL's tool loop ---------------------------------------------------------------

ANSWER = "<answer>5</answer><|im_end|>"


def tool_call(expression: str) -> str:
    return f'<tool_call>\n{{"name": "calculate", "arguments": {{"expression": "{expression}"}}}}\n</tool_call><|im_end|>'


def reply(text: str) -> str:
    """The scripted policy: the user asks for ``calls=N`` calls; ``err`` makes each call one the calculator
    refuses, ``bad`` makes the first call unparsable."""
    user = text.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]  # the first user turn: the row's prompt
    wanted = int(re.search(r"calls=(\d)", user).group(1))
    done = text.count("<tool_response>")
    if "bad" in user and done == 0:
        return '<tool_call>\n{"name": "calculate", "argu\n</tool_call><|im_end|>'
    if done < wanted:
        return tool_call("2 ** 3" if "err" in user else f"2 + {done}")
    return ANSWER


ROWS = [("calls=0", 1), ("calls=1", 2), ("calls=2", 3), ("calls=1 err", 2), ("calls=1 bad", 2), ("calls=0", 1)]
ROWS += [("calls=2", 3), ("calls=1", 2)]


class Seen:
    """What the reward saw: each episode's messages and its environment object."""

    episodes: list = []
    environments: list = []


def turns_reward(*, prompt, completion, example, environment):
    Seen.episodes.append(completion)
    Seen.environments.append(environment)
    return float(sum(m["role"] == "assistant" for m in completion))  # varies, so advantages are not 0


@pytest.fixture
def tool_trainer(tmp_path, one_torch_thread):
    Seen.episodes, Seen.environments = [], []

    def build(**overrides):
        tok = tool_tokenizer()
        rows = [{"prompt": [{"role": "user", "content": text}], "answer": "5"} for text, _ in ROWS]
        args = grpo_args(tmp_path, max_completion_length=384, max_steps=1, **overrides)
        trainer = RLVRTrainer(
            model=tiny_model(tok, max_position_embeddings=2048),
            args=args,
            plugins={"calculator": {}, "turns": {}},
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            engines=Engines(in_process=True),
        )
        scripted_turns(trainer, reply)
        batch = trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])
        return trainer, batch

    plugin = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    with temporary_plugin(plugin):
        yield build


def tool_turns(episode) -> list[str]:
    return [m["content"] for m in episode if m["role"] == "tool"]


def test_episodes_of_different_lengths_in_one_batch(tool_trainer):
    trainer, batch = tool_trainer()
    episodes = Seen.episodes
    assert [sum(m["role"] == "assistant" for m in e) for e in episodes] == [turns for _, turns in ROWS]
    assert tool_turns(episodes[1]) == ["2"] and tool_turns(episodes[2]) == ["2", "3"]
    assert tool_turns(episodes[0]) == [] and episodes[0][-1]["content"] == "<answer>5</answer>"
    [refused] = tool_turns(episodes[3])  # a tool that raises: its message is the tool's turn, the episode goes on
    assert refused.startswith("{'error': ") and "unsupported operation **" in refused
    assert episodes[3][-1]["content"] == "<answer>5</answer>"
    [unparsable] = tool_turns(episodes[4])  # a call TRL cannot parse: an error turn, then the episode goes on
    assert "unparsable tool call" in unparsable and episodes[4][-1]["content"] == "<answer>5</answer>"
    assert episodes[4][1]["name"] == UNPARSABLE_TOOL
    assert all(type(env).__name__ == "CalculatorTool" for env in Seen.environments)  # the `environment` keyword

    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    calls = [0, 1, 2, 1, 1, 0, 2, 1]  # tool turns per episode, by hand
    assert metrics["tools/call_frequency"] == pytest.approx(sum(calls) / 8)  # TRL's, unparsable call included
    assert metrics["tools/failure_frequency"] == pytest.approx(2 / sum(calls))
    assert metrics["tools/calls/calculate"] == pytest.approx(7 / 8)
    assert metrics["tools/errors/calculate"] == pytest.approx(1 / 8)
    assert metrics["tools/unparsable_frequency"] == pytest.approx(1 / 8)
    assert metrics["tools/turns_mean"] == pytest.approx(16 / 8) and metrics["tools/turns_max"] == 3
    for turns in (1, 2, 3):  # the reward is the number of turns, so each bucket's mean is that number
        assert metrics[f"tools/reward_by_turns/{turns}"] == pytest.approx(turns)

    mask, tool_mask = batch["completion_mask"], batch["tool_mask"]
    policy = (mask * tool_mask).sum(dim=1)
    tool = (mask * (1 - tool_mask)).sum(dim=1)
    assert tool[[0, 5]].tolist() == [0, 0] and (tool[[1, 2, 3, 4, 6, 7]] > 0).all()
    assert tool[2] > tool[1]  # two tool results against one
    assert metrics["tokens/policy_mean"] == pytest.approx(policy.float().mean().item())
    assert metrics["tokens/tool_mean"] == pytest.approx(tool.float().mean().item())


def test_no_gradient_through_tool_tokens(tool_trainer):
    """The loss's gradient with respect to each completion token's log-probability (TRL's fused LM head never
    builds the logits; the gradient at a token's logits is this one times d logp / d logits) is 0 at every
    tool-result token and not 0 at the policy's tokens."""
    trainer, batch = tool_trainer()
    assert batch["advantages"].abs().sum() > 0
    seen = []
    score = trainer._get_per_token_logps_and_entropies

    def keep(*args, **kwargs):
        result = score(*args, **kwargs)
        result[0].retain_grad()
        seen.append(result[0])
        return result

    trainer._get_per_token_logps_and_entropies = keep
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train's loop, which is not running
    trainer.compute_loss(trainer.model, batch).backward()
    [logps] = seen
    grad = logps.grad.abs()  # (8, completion length)
    in_loss = (batch["completion_mask"] * batch["tool_mask"]).bool()
    tool_tokens = (batch["completion_mask"] * (1 - batch["tool_mask"])).bool()
    assert tool_tokens.sum() > 100 and torch.all(grad[tool_tokens] == 0)
    assert torch.all(grad[~batch["completion_mask"].bool()] == 0)
    moved = batch["advantages"] != 0  # rewards 1,2,3,2 | 2,1,3,2 by turns: the episodes of 2 turns have 0
    assert moved.tolist() == [True, False, True, False, False, True, True, False]
    assert torch.all(grad[in_loss & moved[:, None]] > 0) and torch.all(grad[~moved] == 0)


def test_max_tool_calling_iterations_ends_the_episode(tool_trainer):
    tool_trainer(max_tool_calling_iterations=1)
    episodes = Seen.episodes
    assert tool_turns(episodes[2]) == ["2"]  # asked for two calls: the second one is not run
    assert [m["role"] for m in episodes[2]] == ["assistant", "tool", "assistant"]
    assert "tool_calls" in episodes[2][-1]
    assert tool_turns(episodes[1]) == ["2"] and episodes[1][-1]["content"] == "<answer>5</answer>"


def test_a_script_environment_factory_beside_a_plugin_environment_is_refused(tmp_path):
    tok = tool_tokenizer()
    with pytest.raises(TypeError, match=r"plugin\(s\) 'calculator' provide the environments .* do not also pass"):
        RLVRTrainer(
            model=tiny_model(tok),
            args=grpo_args(tmp_path),
            plugins={"calculator": {}, "r1-accuracy": {}},
            train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1"}], "answer": "2"}]),
            processing_class=tok,
            environment_factory=lambda: None,
        )
