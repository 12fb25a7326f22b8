"""Environments and tools on TRL's tool loop: the ``calculator`` tool, episodes of several turns driven by
scripted turns (a tiny model never writes a tool call by itself), what reaches the loss, the metrics, and
the refusals of ``RLVRTrainer`` and ``rlvr train --check``."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
import torch
import yaml
from datasets import Dataset

from rlvr_plugins import Environment, Plugin, hookimpl
from rlvr_plugins.builtin.calculator import calculate
from rlvr_plugins.episodes import UNPARSABLE_TOOL
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import (
    TINY,
    grpo_args,
    reward_plugin_class,
    scripted_turns,
    scripted_turns_plugin,
    tiny_model,
    tool_call,
    tool_tokenizer,
)
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


def reply(text: str) -> str:
    """The scripted policy: the user asks for ``calls=N`` calls; ``err`` makes each call one the calculator
    refuses, ``bad`` makes the first call unparsable."""
    user = text.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]  # the first user turn: the row's prompt
    wanted = int(re.search(r"calls=(\d)", user).group(1))
    done = text.count("<tool_response>")
    if "bad" in user and done == 0:
        return '<tool_call>\n{"name": "calculate", "argu\n</tool_call><|im_end|>'
    if done < wanted:
        return tool_call("calculate", expression="2 ** 3" if "err" in user else f"2 + {done}")
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
    assert trainer._rlvr_batch["lengths"].tolist() == policy.tolist()  # what length penalties see
    assert metrics["tokens/tool_mean"] == pytest.approx(tool.float().mean().item())


def test_trls_parser_is_restored_after_a_batch_that_raises(tool_trainer):
    from trl.trainer import grpo_trainer

    trl_parse = grpo_trainer.parse_response
    trainer, _ = tool_trainer()
    assert grpo_trainer.parse_response is trl_parse
    seen = []

    def broken(text: str) -> str:
        seen.append(grpo_trainer.parse_response)
        raise RuntimeError("generation failed")

    scripted_turns(trainer, broken)
    rows = [{"prompt": [{"role": "user", "content": "calls=1"}], "answer": "5"}] * 8
    with pytest.raises(RuntimeError, match="generation failed"):
        trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])
    assert seen and seen[0] is not trl_parse  # swapped for the batch
    assert grpo_trainer.parse_response is trl_parse  # and restored after its exception


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


class OwnRollout(Plugin):
    """A third-party generation procedure (TRL's ``rollout_func``)."""

    name = "own-rollout"

    @hookimpl
    def rlvr_rollout_func(self):
        return lambda prompts, trainer: {}


def test_a_plugins_rollout_func_is_refused_with_tools_naming_the_plugin_and_why(tmp_path):
    tok = tool_tokenizer()
    with temporary_plugin(OwnRollout), pytest.raises(ConfigError) as refused:
        RLVRTrainer(
            model=tiny_model(tok, max_position_embeddings=2048),
            args=grpo_args(tmp_path),
            plugins={"calculator": {}, "r1-accuracy": {}, "own-rollout": {}},
            train_dataset=Dataset.from_list(chat_rows("1+1")),
            processing_class=tok,
        )
    assert str(refused.value).startswith("invalid config in plugins.own-rollout: it provides TRL's rollout_func")
    assert "generates only the first turn with the rollout_func and every later turn itself" in str(refused.value)


# -- rlvr train with an environment enabled in the YAML ----------------------------------------


ScriptedTurns = scripted_turns_plugin(reply)


def agent_config(tmp_path, rows, tokenizer=None, trainer=None, environment="calculator", **plugins) -> str:
    folder = tmp_path / "tool-tokenizer"
    (tokenizer or tool_tokenizer()).save_pretrained(folder)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = {
        "output_dir": str(tmp_path / "run"),
        "seed": 0,
        "model": {"tiny": {**TINY, "max_position_embeddings": 2048}, "tokenizer": str(folder)},
        "data": {"train": {"source": "jsonl", "path": str(data)}},
        "plugins": {environment: {}, "r1-accuracy": {}, **plugins},
        "engine": {"in_process": True},
        "trainer": {
            "max_steps": 2,
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 384,
            "learning_rate": 1e-3,
            "logging_steps": 1,
            "save_strategy": "no",
            "use_cpu": True,
            "disable_tqdm": True,
            "beta": 0.0,
            **(trainer or {}),
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def chat_rows(*texts: str, **columns) -> list[dict]:
    return [{"prompt": [{"role": "user", "content": text}], "answer": "5", **columns} for text in texts]


def test_rlvr_train_with_the_calculator_enabled_in_the_yaml(tmp_path, rlvr_cli, one_torch_thread):
    config = agent_config(tmp_path, chat_rows("calls=1", "calls=2 err"), **{"scripted-turns": {}})
    with temporary_plugin(ScriptedTurns):
        result = rlvr_cli("train", config)
    assert result.exit_code == 0, result.err[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "tools/calls/calculate" in r]
    assert len(steps) == 2
    for row in steps:  # each step is one prompt's group of 4 episodes: 1 call each, or 2 refused calls each
        assert row["tools/calls/calculate"] in (1.0, 2.0)
        assert row["tools/errors/calculate"] == (0.0 if row["tools/calls/calculate"] == 1.0 else 2.0)
        assert row["tools/turns_mean"] == row["tools/calls/calculate"] + 1
        assert row["tokens/tool_mean"] > 0 and row["tokens/policy_mean"] > 0
        assert row["rewards/r1-accuracy/mean"] == 1.0  # the answer is in the policy's last turn
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["grpo_steps"] == 2
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0


def test_check_refuses_a_row_routed_to_no_environment(tmp_path, rlvr_cli):
    config = agent_config(tmp_path, chat_rows("calls=1", "calls=0", environment="python"))
    result = rlvr_cli("train", config, "--check")
    assert result.exit_code == 2
    assert "row 0 (line 1) has environment 'python', which no plugin registers (and 1 more rows)" in result.err
    assert "registered: ['calculator']" in result.err and "Traceback" not in result.err


def test_check_refuses_environments_when_trl_tool_loop_libraries_are_missing(tmp_path, rlvr_cli, monkeypatch):
    from rlvr_plugins.train import run

    monkeypatch.setattr(run, "tool_loop_libraries", lambda: ("5.10.0", False))
    result = rlvr_cli("train", agent_config(tmp_path, chat_rows("calls=1")), "--check")
    assert result.exit_code == 2 and "Traceback" not in result.err
    assert (
        "plugin 'calculator' enables environment 'calculator', but TRL's tool loop needs jmespath with transformers "
        "5.10.0 (< 5.13.0); pip install jmespath"
    ) in result.err


def test_check_runs_the_multi_turn_prefix_check_for_the_runs_tokenizer(tmp_path, rlvr_cli):
    from test_turns import think_off_breaking

    tok = tool_tokenizer()
    tok.chat_template = think_off_breaking()  # breaks the prefix with thinking off only
    off = agent_config(tmp_path, chat_rows("calls=1"), tok, {"chat_template_kwargs": {"enable_thinking": False}})
    result = rlvr_cli("train", off, "--check")
    assert result.exit_code == 2 and "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert "model.tokenizer: the chat template of " in result.err
    assert (
        "breaks multi-turn tool use, which plugin 'calculator' enables (environment 'calculator'): with thinking "
        "off: a tool result's tokens do not follow the assistant's tool call as a prefix"
    ) in result.err
    on = agent_config(tmp_path, chat_rows("calls=1"), tok)  # the run thinks: the other mode's break is a warning
    result = rlvr_cli("train", on, "--check")
    assert result.exit_code == 0, result.err
    warnings = [line for line in result.out.splitlines() if line.startswith("warning: the chat template: ")]
    assert [w.split(": ")[2] for w in warnings] == ["with thinking off"] * 2
    assert "this run's chat_template_kwargs render the other mode" in warnings[0]


def test_rlvr_train_with_qwen_thinking_and_an_environment(tmp_path, rlvr_cli):
    """The rows reach TRL's tool loop as messages carrying each row's mode; the thinking budget is refused by
    --check in one line, with the reason (plugins/rlvr-qwen-thinking/tests/test_qwen_tools.py trains episodes)."""
    from rlvr_plugins.testing import trl_chat_template

    tok = tool_tokenizer(trl_chat_template("qwen3"))
    rows = chat_rows("calls=1", "calls=0", "calls=1 /no_think")
    config = agent_config(tmp_path, rows, tok, **{"qwen-thinking": {"no_think_share": 0.5}})
    result = rlvr_cli("train", config, "--check")
    assert result.exit_code == 0, result.err  # before: "train row 0 is rendered as plain text"
    config = agent_config(tmp_path, rows, tok, **{"qwen-thinking": {"thinking_budget": 50}})
    result = rlvr_cli("train", config, "--check")  # before the model loads
    assert result.exit_code == 2 and "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    assert "plugins.qwen-thinking: thinking_budget=50 cannot apply with tools or an environment" in result.err
    assert "the early-stop text would be trained on" in result.err


def test_train_refuses_a_tokenizer_that_cannot_render_tool_calls(tmp_path, rlvr_cli):
    config = yaml.safe_load(open(agent_config(tmp_path, chat_rows("calls=1"))))
    config["model"]["tokenizer"] = "char"
    (tmp_path / "char.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = rlvr_cli("train", tmp_path / "char.yaml")
    assert result.exit_code == 2 and "Traceback" not in result.err
    assert (
        "model.tokenizer: the chat template of 'char' cannot render tool calls, but plugin 'calculator'" in result.err
    )


class Notes:
    """A second environment, with state: the notes written in this episode."""

    def reset(self, **row):
        assert "environment" not in row  # TRL keeps its routing column from reset
        self.notes = []

    def note(self, text: str) -> str:
        """Keep a note.

        Args:
            text: the note.
        """
        self.notes.append(text)
        return f"{len(self.notes)} notes"


class NotesPlugin(Plugin):
    name = "notes"

    @hookimpl
    def rlvr_environments(self, register):
        register(Environment("notes", Notes))


def test_several_environments_route_each_row_by_its_environment_column(tmp_path, one_torch_thread):
    def reply(text: str) -> str:
        if "<tool_response>" in text:
            return ANSWER
        if '"name": "calculate"' in text:
            return tool_call("calculate", expression="2 + 3")
        return tool_call("note", text="five")

    Seen.episodes, Seen.environments = [], []
    tok = tool_tokenizer()
    rows = [{"prompt": [{"role": "user", "content": "x"}], "environment": e} for e in ["calculator", "notes"] * 2]
    plugin = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    with temporary_plugin(plugin), temporary_plugin(NotesPlugin):
        trainer = RLVRTrainer(
            model=tiny_model(tok, max_position_embeddings=2048),
            args=grpo_args(tmp_path, max_completion_length=384, per_device_train_batch_size=4, num_generations=2),
            plugins={"calculator": {}, "notes": {}, "turns": {}},
            train_dataset=Dataset.from_list(rows),
            processing_class=tok,
            engines=Engines(in_process=True),
        )
        scripted_turns(trainer, reply)
        trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])
    assert [tool_turns(e) for e in Seen.episodes] == [["5"], ["1 notes"], ["5"], ["1 notes"]]
    assert [type(env).__name__ for env in Seen.environments] == ["CalculatorTool", "Notes"] * 2
    assert [env.notes for env in Seen.environments[1::2]] == [["five"], ["five"]]  # the final state, per rollout


def test_train_refuses_prompts_that_are_plain_text(tmp_path, rlvr_cli):
    rows = [{"prompt": "2+3=", "answer": "5"}]
    result = rlvr_cli("train", agent_config(tmp_path, rows))
    assert result.exit_code == 2 and "Traceback" not in result.err
    assert "enables environment 'calculator', but train row 0 is rendered as plain text" in result.err


RELEASE = threading.Event()
"""What a hanging tool waits for: set by the test at its end, so that no thread outlives it."""


class Misbehaving:
    """Tools that misbehave, each in its own way."""

    def reset(self, **row):
        return None

    def misbehave(self, how: str) -> str:
        """Misbehave.

        Args:
            how: raise, flood, bytes, surrogate, hang, none or list.
        """
        if how == "raise":
            raise RuntimeError("broken tool")
        if how == "hang":
            RELEASE.wait()
            return "too late"
        answers = {"flood": "x" * (1 << 20), "bytes": b"ok \xff\xfe", "surrogate": "a\udcffb", "list": [1, "a"]}
        return answers.get(how)


class MisbehavingPlugin(Plugin):
    name = "misbehaving"

    @hookimpl
    def rlvr_environments(self, register):
        register(Environment("misbehaving", Misbehaving, max_result_chars=100, tool_timeout_s=1.0))


def misbehaving_trainer(tmp_path):
    def reply(text: str) -> str:
        if "<tool_response>" in text:
            return ANSWER
        how = text.split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
        return tool_call("misbehave", how=how)

    tok = tool_tokenizer()
    trainer = RLVRTrainer(
        model=tiny_model(tok, max_position_embeddings=2048),
        args=grpo_args(tmp_path, max_completion_length=384, per_device_train_batch_size=4, num_generations=2),
        plugins={"misbehaving": {}, "turns": {}},
        train_dataset=Dataset.from_list(chat_rows("hang", "hang")),
        processing_class=tok,
        engines=Engines(in_process=True),
    )
    scripted_turns(trainer, reply)
    return trainer


def test_a_tool_that_raises_floods_or_returns_invalid_utf8_is_a_turn_and_the_episode_goes_on(
    tmp_path, one_torch_thread
):
    Seen.episodes, Seen.environments = [], []
    rows = [{"prompt": [{"role": "user", "content": how}]} for how in ("raise", "flood", "bytes", "surrogate")]
    plugin = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    with temporary_plugin(plugin), temporary_plugin(MisbehavingPlugin):
        trainer = misbehaving_trainer(tmp_path)
        trainer._generate_and_score_completions([{**r, "rlvr_index": i} for i, r in enumerate(rows)])
    answers = [tool_turns(e) for e in Seen.episodes]
    assert answers == [
        ["{'error': 'broken tool'}"],
        ["x" * 100 + f"\n... ({(1 << 20) - 100} more characters)"],
        ["{'error': \"the tool's answer is not valid UTF-8 (byte 3 of 5)\"}"],
        ["a?b"],
    ]
    assert all(e[-1]["content"] == "<answer>5</answer>" for e in Seen.episodes)  # every episode went on
    assert trainer._metrics["train"]["tools/errors/misbehave"][-1] == pytest.approx(2 / 4)


def test_a_tool_that_hangs_times_out_as_a_counted_turn_and_the_run_goes_on(tmp_path, one_torch_thread, monkeypatch):
    from rlvr_plugins import episodes

    Seen.episodes, Seen.environments = [], []
    RELEASE.clear()
    rows = [{"prompt": [{"role": "user", "content": how}], "rlvr_index": i} for i, how in enumerate(["hang", "raise"])]
    rows += [
        {"prompt": [{"role": "user", "content": how}], "rlvr_index": 2 + i} for i, how in enumerate(["none", "list"])
    ]
    plugin = reward_plugin_class("turns", turns_reward, isolated=False, completion_format="messages")
    try:
        with temporary_plugin(plugin), temporary_plugin(MisbehavingPlugin):
            trainer = misbehaving_trainer(tmp_path)
            start = time.monotonic()
            trainer._generate_and_score_completions(rows)
            assert time.monotonic() - start < 30  # the hung call held the batch for its deadline only
            late = "{'error': 'timeout: misbehave did not answer within 1 s'}"
            assert [tool_turns(e) for e in Seen.episodes] == [
                [late],
                ["{'error': 'broken tool'}"],
                ["None"],
                ["[1, 'a']"],
            ]
            assert all(e[-1]["content"] == "<answer>5</answer>" for e in Seen.episodes)  # every episode went on
            metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
            assert metrics["tools/timeouts/misbehave"] == pytest.approx(1 / 4)
            assert metrics["tools/errors/misbehave"] == pytest.approx(2 / 4)  # the timeout is an error too
            assert episodes.hung_calls() == 1  # the late call runs on, unwaited

            # at the bound of late calls still running, every call is answered at once, without being started
            monkeypatch.setattr(episodes, "MAX_HUNG_CALLS", 1)
            Seen.episodes = []
            start = time.monotonic()
            trainer._generate_and_score_completions(rows)
            assert time.monotonic() - start < 15
            refused = "{'error': 'timeout: misbehave was not called: 1 earlier tool calls ran past their deadline"
            assert all(tool_turns(e)[0].startswith(refused) for e in Seen.episodes)  # every tool, quick ones too
            assert trainer._metrics["train"]["tools/timeouts/misbehave"][-1] == pytest.approx(4 / 4)
            assert episodes.hung_calls() == 1
    finally:
        RELEASE.set()
    deadline = time.monotonic() + 10
    while episodes.hung_calls() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert episodes.hung_calls() == 0  # released, the late call ended and is no longer counted


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "5"])
def test_an_environment_deadline_must_be_a_positive_number_of_seconds(bad):
    assert Environment("x", Misbehaving).tool_timeout_s == 60.0
    with pytest.raises(TypeError, match=r"Environment 'x': tool_timeout_s must be a number of seconds > 0, got "):
        Environment("x", Misbehaving, tool_timeout_s=bad)


def test_an_async_tool_past_its_deadline_is_cancelled_and_a_sync_one_answers_in_time():
    from rlvr_plugins.episodes import ToolTimeout, bounded_tool

    cancelled = []

    async def slow(x: int) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(x)
            raise
        return "late"

    async def fast(x: int) -> int:
        return x * 2

    with pytest.raises(ToolTimeout, match="timeout: slow did not answer within 0.2 s"):
        asyncio.run(bounded_tool(slow, 100, 0.2)(x=3))
    assert cancelled == [3]
    assert asyncio.run(bounded_tool(fast, 100, 5)(x=4)) == "8"
    assert bounded_tool(lambda x: x + 1, 100, 5)(x=1) == "2"
    with pytest.raises(KeyError):  # an exception of the tool is raised as it is, for TRL to write its message
        bounded_tool(lambda x: {}[x], 100, 5)(x="k")


@pytest.mark.slow
def test_episode_metrics_of_a_batch_split_across_two_processes_match_one_process(rank_runs):
    one, two = rank_runs[1]["agent"], rank_runs[2]["agent"]  # one prompt's group on each process
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert a == pytest.approx(b)
    # by hand: step 1 is "calls=1" (1 call) and "calls=2 err" (2 refused calls), step 2 "calls=2" and "calls=0"
    assert [row["tools/calls/calculate"] for row in one] == pytest.approx([1.5, 1.0])
    assert [row["tools/errors/calculate"] for row in one] == pytest.approx([1.0, 0.0])
    assert [row["tools/turns_mean"] for row in one] == pytest.approx([2.5, 2.0])


@pytest.mark.slow
def test_a_group_of_episodes_split_across_two_processes_trains_as_on_one(rank_runs):
    """Each step is one prompt's group of 8 episodes, 4 on each process (half call the calculator and answer right,
    half answer wrong at once): the two processes' steps have the one process's loss, reward and episode metrics."""
    one, two = rank_runs[1]["agent-split"], rank_runs[2]["agent-split"]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        assert set(a) == set(b) and a == pytest.approx(b, rel=1e-4, abs=1e-6)
        assert a["tools/calls/calculate"] == 0.5 and a["tools/turns_mean"] == 1.5  # by hand: 4 of 8 call once
        assert a["loss"] != 0


# -- a third-party environment plugin, written from docs/writing-plugins.md alone ----------------

ENVIRONMENT_PLUGIN = Path(__file__).parent / "environment-plugin"


def tally_reply(text: str) -> str:
    """The scripted policy for ``rlvr-tally``: add 3, then what is left to reach the target, then answer."""
    target = int(re.search(r"Reach (\d+) by adding", text).group(1))
    results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)
    if not results:
        return tool_call("add", number=3)
    if results == ["3"]:
        return tool_call("add", number=target - 3)
    return ANSWER


def test_a_third_party_environment_plugin_is_pip_installed_and_trained(tmp_path, rlvr_cli, monkeypatch):
    import shutil
    import subprocess
    import sys

    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    source = shutil.copytree(ENVIRONMENT_PLUGIN, tmp_path / "environment-plugin")  # the build leaves files there
    installed = subprocess.run([*pip, str(source)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    monkeypatch.syspath_prepend(str(target))
    listed = json.loads(rlvr_cli("plugins", "--json").out)
    assert [p["distribution"] for p in listed if p["name"] == "tally"] == ["rlvr-tally"]

    rows = chat_rows("Count.", "Count again.")
    rows[0]["target"], rows[1]["target"] = 7, 12
    config = agent_config(tmp_path, rows, environment="tally", **{"scripted-turns": {}})
    with temporary_plugin(scripted_turns_plugin(tally_reply)):
        result = rlvr_cli("train", config)
    assert result.exit_code == 0, result.err[-2000:]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in metrics if "tools/calls/add" in r]
    assert len(steps) == 2
    for row in steps:  # every episode: add(3), add(target - 3), the answer
        assert row["tools/calls/add"] == 2.0 and row["tools/errors/add"] == 0.0 and row["tools/turns_mean"] == 3.0
        assert row["rewards/Tally/mean"] == 1.0  # get_reward(): the total reached the row's target
        assert row["rewards/tally-calls/mean"] == 2.0  # the reward that reads the environment's final state
