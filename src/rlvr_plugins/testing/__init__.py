"""Helpers for testing rlvr plugins in-process, and for scripts: a tiny model, rows of the demo task, a GRPOConfig
(the table in docs/python-api.md, "A local tiny model and tokenizer").

Nothing here downloads anything: the model is a seeded tiny Qwen3 built from a config and
the tokenizer is the demo's character-level one. The fixtures built on these helpers
(``tokenizer``, ``tiny_trainer``, ``reward_plugin``, ``rlvr_cli``) come with the pytest plugin,
:mod:`rlvr_plugins.testing.pytest_plugin`, which pytest loads wherever rlvr-plugins is installed.

>>> from rlvr_plugins.testing import tiny_rows
>>> tiny_rows(2)[0]["rlvr_index"]
0
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
"""The tiny Qwen3's sizes: two layers of width 32, about 20k parameters with the char vocabulary."""


def shared_data() -> Path | None:
    """The shared math sets: ``$RLVR_SHARED_DATA``, else ``../shared/data`` next to the working directory's repo."""
    env = os.environ.get("RLVR_SHARED_DATA")
    candidates = (
        [Path(env)]
        if env
        else [Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[3] / "shared" / "data"]
    )
    return next((p for p in candidates if p.is_dir()), None)


def char_tokenizer():
    """The demo's character-level tokenizer (a ``PreTrainedTokenizerFast``, one token per character,
    with a chat template), built locally.

    >>> tok = char_tokenizer()
    >>> tok.decode(tok("12+3", add_special_tokens=False)["input_ids"])
    '12+3'
    """
    from ..demo.tokenizer import build_char_tokenizer

    return build_char_tokenizer()


TOOL_MARKERS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def trl_chat_template(name: str) -> str:
    """The text of a chat template TRL ships (``trl/chat_templates/<name>.jinja``: ``qwen2_5``, ``qwen3``,
    ``qwen3_training``, ``qwen3_5_think``, ...)."""
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def tool_tokenizer(chat_template: str | None = None):
    """A character-level tokenizer over printable ASCII with a chat template that renders tool calls:
    ``chat_template`` (its text), by default the Qwen2.5 template that TRL ships (tool calls as JSON
    between ``<tool_call>`` markers), so that TRL's tool loop renders tools and parses calls as it does
    for Qwen. Qwen's markers (``<|im_start|>``, ``<|im_end|>``, the tool-call and tool-response tags) are
    one token each and ``<|im_end|>`` is the end of a turn. Prompts are long (a tool's schema is a few
    hundred tokens): give the tiny model ``max_position_embeddings=2048``.

    >>> tok = tool_tokenizer()
    >>> tok.decode(tok("<tool_call>{}", add_special_tokens=False)["input_ids"][:1])
    '<tool_call>'
    """
    import string

    from ..demo.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer(string.printable)
    tok.add_tokens(TOOL_MARKERS)
    tok.eos_token = "<|im_end|>"
    tok.chat_template = trl_chat_template("qwen2_5") if chat_template is None else chat_template
    tok.model_max_length = 4096
    return tok


def tool_call(name: str, **arguments: Any) -> str:
    """A policy turn that calls tool ``name`` in the Qwen format of :func:`tool_tokenizer`'s templates.

    >>> tool_call("add", number=2)
    '<tool_call>\\n{"name": "add", "arguments": {"number": 2}}\\n</tool_call><|im_end|>'
    """
    import json

    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call><|im_end|>"


def scripted_turns(trainer, reply: Callable[[str], str]) -> None:
    """Make ``trainer`` generate scripted text instead of sampling: each turn of each episode is
    ``reply(text so far)`` (the decoded prompt, earlier turns and tool results included; the turn ends
    with the tokenizer's ``<|im_end|>``), tokenized. The rest is TRL's: parsing the tool calls, running the
    tools, the tool mask, the loss (on the model's log-probabilities of the scripted tokens). A tiny model
    never writes a tool call by itself."""
    tok = trainer.processing_class

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        texts = [reply(tok.decode(ids)) for ids in prompt_ids]
        return [tok(text, add_special_tokens=False)["input_ids"] for text in texts], None

    trainer._generate_single_turn = generate


def scripted_turns_plugin(reply: Callable[[str], str], name: str = "scripted-turns") -> type:
    """A plugin class (enable it as ``name``) that makes the run's trainer write :func:`scripted_turns`
    with ``reply``: a test seam for ``rlvr train``, through the ``rlvr_trainer_callbacks`` hook (use it
    with :func:`rlvr_plugins.manager.temporary_plugin`)."""
    from .. import Plugin, hookimpl

    class ScriptedTurns(Plugin):
        @hookimpl
        def rlvr_trainer_callbacks(self, trainer):
            scripted_turns(trainer, reply)

    ScriptedTurns.name = name
    return ScriptedTurns


def tiny_model(tokenizer, seed: int = 0, **overrides: Any):
    """A freshly initialised tiny Qwen3 causal LM (sizes :data:`TINY`, then ``overrides``, e.g.
    ``max_position_embeddings``) for ``tokenizer``'s vocabulary; the same weights for the same ``seed``."""
    from ..demo.model import build_tiny_model

    return build_tiny_model(tokenizer, seed=seed, **{**TINY, **overrides})


def digit_share(*, prompt, completion, example) -> float:
    """A reward that varies inside a group even for an untrained policy: the share of digits.

    >>> digit_share(prompt="", completion="a1b2", example={})
    0.5
    """
    return sum(c.isdigit() for c in completion) / max(1, len(completion))


def reward_plugin_class(name: str, fn: Callable[..., Any], *, reward_name: str | None = None, **reward: Any):
    """A :class:`~rlvr_plugins.Plugin` subclass named ``name`` whose ``rlvr_reward_functions`` registers
    one :class:`~rlvr_plugins.RewardFunction`: ``fn`` under ``reward_name`` (default ``name``), with
    ``reward``'s fields (``weight``, ``isolated``, ...). Make it discoverable with
    ``rlvr_plugins.manager.temporary_plugin``, or use the ``reward_plugin`` fixture.

    >>> from rlvr_plugins.manager import build_plugin_set, temporary_plugin
    >>> with temporary_plugin(reward_plugin_class("digits", digit_share, weight=0.5)):
    ...     [(owner, reward)] = build_plugin_set({"digits": {}}).reward_functions()
    >>> owner, reward.name, reward.weight, reward.fn is digit_share
    ('digits', 'digits', 0.5, True)
    """
    from .. import Plugin, RewardFunction, hookimpl

    class RewardPlugin(Plugin):
        @hookimpl
        def rlvr_reward_functions(self, register):
            register(RewardFunction(reward_name or name, fn, **reward))

    RewardPlugin.name = name
    RewardPlugin.__qualname__ = RewardPlugin.__name__ = f"RewardPlugin[{name}]"
    return RewardPlugin


def tiny_rows(n: int = 16, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows of 1–2 digit additions with ``prompt``, ``answer``, ``solution``, ``rlvr_index``."""
    from ..demo.task import split_train_eval

    rows, _ = split_train_eval(n, 0, seed, max_digits=2)
    return [{**r, "rlvr_index": i} for i, r in enumerate(rows)]


def grpo_args(tmp_path, **overrides: Any):
    """A small CPU GRPOConfig: 8 completions per step in groups of 4, 8 new tokens, 2 steps."""
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(Path(tmp_path) / "run"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=7,
        disable_tqdm=True,
        beta=0.0,
    )
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


TINY_TRAINER = {
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 8,
    "max_steps": 2,
    "learning_rate": 1e-3,
    "save_strategy": "no",
    "use_cpu": True,
    "disable_tqdm": True,
    "beta": 0.0,
}
"""The ``trainer:`` section of :func:`tiny_trainer`: 2 steps of 8 completions in groups of 4, 8 new tokens."""


def tiny_trainer(tmp_path, plugins: dict, tokenizer=None, **trainer_overrides: Any):
    """An ``RLVRTrainer`` on a tiny model and 16 demo rows, its config built through ``run.prepare``.

    ``plugins`` is the config's ``plugins:`` section; call it inside the ``temporary_plugin``
    blocks of any in-process plugin it enables. Rewards run in-process.
    """
    from datasets import Dataset

    from ..rewards import Engines
    from ..train.run import prepare
    from ..trainer import RLVRTrainer

    tokenizer = tokenizer if tokenizer is not None else char_tokenizer()
    config = {
        "output_dir": str(Path(tmp_path) / "run"),
        "seed": 7,
        "plugins": plugins,
        "trainer": {**TINY_TRAINER, **trainer_overrides},
    }
    prepared = prepare(config)
    return RLVRTrainer(
        plugin_set=prepared.plugin_set,
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=prepared.grpo_args,
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )


def adversarial_texts(size: int = 1_000_000) -> dict[str, str]:
    r"""Texts of about ``size`` characters, by name, that make a text scanner slow when it
    backtracks or rescans: many openers of every kind that a reward looks for (code fences,
    ``<think>``, ``<answer>``, ``\boxed{``, ``$``, ``\(``, ``\text{``) never closed, deep nesting,
    long runs of what an optional part of a pattern may eat (spaces, digits, commas), plain
    runs of one character, and many complete blocks (fences, boxes, answer and think blocks).
    Every scanner of a completion should handle each in linear time.
    """

    def repeat(unit: str) -> str:
        return unit * max(1, size // len(unit))

    half = size // 2
    return {
        "unclosed_fences": repeat("```python\n"),
        "fences_with_code": repeat("```python\nprint(1)\n"),
        "one_fence_many_lines": "```python\n" + repeat("```js\nx\n"),
        "fence_without_newline": repeat("```python"),
        "answer_openers": repeat("<answer>"),
        "answer_closers": repeat("</answer>"),
        "think_openers": repeat("<think>"),
        "think_closers": repeat("</think>"),
        "interleaved_tags": repeat("<think><answer></think>"),
        "box_openers": repeat("\\boxed{"),
        "box_then_braces": "\\boxed{" + "{" * size,
        "nested_text": "\\text{" * (size // 14) + "x" + "}" * (size // 14),
        "text_openers": repeat("\\text{"),
        "hashes": repeat("####"),
        "hash_then_spaces": "#### " + " " * size + "x",
        "hash_dollar_spaces": "#### \\$" + " " * size + "x",
        "digit_then_spaces": "1" + " " * size + "x",
        "comma_then_spaces": "1," + " " * size + "x",
        "digit_runs": repeat("1 "),
        "commas_and_digits": repeat("1,"),
        "thousands": "1" + repeat(",000") + "0",
        "dollars": repeat("$"),
        "dollar_words": repeat("$a"),
        "math_openers": repeat("\\("),
        "display_openers": repeat("\\["),
        "backslashes": repeat("\\"),
        "braces_open": repeat("{"),
        "spaces": " " * size,
        "newlines": "\n" * size,
        "digits": "1" * size,
        "letters": "a" * size,
        "either_or": repeat("either "),
        "flags": repeat("/think /no_think "),
        "chinese_in_text": "$\\text{" + "中" * half + "}$",
        "letter_then_spaces": "1, a" + " " * size + "x",
        "closed_fences": repeat("```python\nx\n```\n"),
        "closed_boxes": repeat("\\boxed{7}"),
        "answer_blocks": repeat("<answer>7</answer>"),
        "think_blocks": repeat("<think>a</think>"),
    }


def time_each(fn, texts: dict[str, str], limit_s: float) -> dict[str, tuple[Any, float]]:
    """``{name: (fn(text), seconds)}`` for each text, run one after another in a forked child so
    that a scan slower than ``limit_s`` fails the test at once (the child is killed) instead of
    hanging it: AssertionError naming the text. Results must pickle. Linux only (``fork``)."""
    import multiprocessing
    import time

    parent, child = multiprocessing.Pipe(duplex=False)

    def run() -> None:
        for name, text in texts.items():
            start = time.perf_counter()
            result = fn(text)
            child.send((name, result, time.perf_counter() - start))

    process = multiprocessing.get_context("fork").Process(target=run, daemon=True)
    process.start()
    child.close()
    label, wait_s = getattr(fn, "__name__", repr(fn)), limit_s + 5.0
    out: dict[str, tuple[Any, float]] = {}
    try:
        for name in texts:
            if not parent.poll(wait_s):
                raise AssertionError(f"{label} on {name!r}: no result after {wait_s:.0f} s")
            got, result, seconds = parent.recv()
            out[got] = (result, seconds)
    except EOFError:
        raise AssertionError(f"{label}: the child died after {sorted(out)}") from None
    finally:
        process.kill()
        process.join()
    slow = {name: round(seconds, 2) for name, (_, seconds) in out.items() if seconds > limit_s}
    assert not slow, f"{label}: slower than {limit_s} s on {slow}"
    return out


SFT_TEMPLATES = ({"r1-accuracy": {}}, {"r1-zero-template": {}, "r1-accuracy": {}})
"""Prompt forms the shared SFT policy learns: the plain one and the R1-Zero template (the CPU recipes' two)."""


def sft_policy(folder: str | Path, problems: int = 300, epochs: int = 2) -> Path:
    """Save into ``folder`` a tiny policy fine-tuned on one-digit additions (worked solutions in R1's
    ``<think>…</think><answer>…</answer>`` format), prompts plain and in the R1-Zero template.

    About 20 s on one CPU thread. Sampled at temperature 1 it gets some answers and most formats
    right, so a GRPO step from it has rewards that differ within a group: a non-zero advantage,
    loss and gradient (a policy that scores every completion 0 has none).
    """
    from ..demo.task import split_train_eval
    from ..manager import build_plugin_set
    from ..train import data
    from ..train.sft import run_sft, save_trained
    from ..train.validate import SFTSection

    folder = Path(folder)
    tokenizer = char_tokenizer()
    rows, _ = split_train_eval(problems, 0, 0, max_digits=1)
    rendered = [r for plugins in SFT_TEMPLATES for r in data.render(rows, build_plugin_set(plugins), tokenizer, 0)]
    section = SFTSection(
        trl={
            "per_device_train_batch_size": 16,
            "learning_rate": 1e-2,
            "lr_scheduler_type": "constant",
            "num_train_epochs": epochs,
            "use_cpu": True,
            "disable_tqdm": True,
            "logging_steps": 1000,
        }
    )
    trainer = run_sft(
        tiny_model(tokenizer, max_position_embeddings=1024),
        tokenizer,
        rendered,
        section,
        folder / "sft",
        seed=0,
        max_completion_length=16,
    )
    save_trained(trainer, folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return folder / "model"
