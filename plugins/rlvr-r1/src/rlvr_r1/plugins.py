"""DeepSeek-R1's rule-based rewards as rlvr plugins (DeepSeek-AI 2025, §2.2.2 and §2.3.2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlvr_plugins import Plugin, RewardFunction, hookimpl

from .answers import accuracy
from .format import format_score
from .language import language_consistency, thinking_text


@dataclass(frozen=True)
class AccuracyScorer:
    """1.0 if the final answer (outside the thinking part) equals the reference, symbolically."""

    answer_column: str = "answer"
    think_opened: bool = False
    fallback: str | None = "gsm8k"

    def __call__(self, *, prompt, completion, example):
        reference = example.get(self.answer_column)
        if reference is None:
            return None
        return accuracy(completion, str(reference), think_opened=self.think_opened, fallback=self.fallback)


@dataclass(frozen=True)
class FormatScorer:
    """1.0 if the completion is exactly ``<think> … </think> <answer> … </answer>`` with real content."""

    think_opened: bool = False

    def __call__(self, *, prompt, completion, example):
        return format_score(completion, think_opened=self.think_opened)


@dataclass(frozen=True)
class LanguageScorer:
    """Share of the chain of thought's words that are in the target language."""

    target: str = "en"
    think_opened: bool = False

    def __call__(self, *, prompt, completion, example):
        return language_consistency(thinking_text(completion, think_opened=self.think_opened), self.target)


class AccuracyPlugin(Plugin):
    name = "r1-accuracy"
    description = "R1 accuracy reward: final answer checked against the reference with math-verify"

    @dataclass
    class Options:
        weight: float = 1.0
        answer_column: str = "answer"
        think_opened: bool = False
        fallback: Literal["gsm8k"] | None = "gsm8k"

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        register(RewardFunction(self.name, AccuracyScorer(o.answer_column, o.think_opened, o.fallback), o.weight,
                                example=example_item(o.think_opened, {o.answer_column: "2"})))


def example_item(think_opened: bool, row: dict) -> dict:
    """A correct, well-formed completion of ``1+1=``: the item ``rlvr train --check`` scores once."""
    completion = "<think>1+1=2</think><answer>2</answer>"
    return {"prompt": "1+1=", "completion": completion.removeprefix("<think>") if think_opened else completion,
            "example": row}


class FormatPlugin(Plugin):
    name = "r1-format"
    description = "R1 format reward: <think> reasoning </think> <answer> answer </answer>, content checked"

    @dataclass
    class Options:
        weight: float = 1.0
        think_opened: bool = False

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(RewardFunction(self.name, FormatScorer(self.options.think_opened), self.options.weight,
                                example=example_item(self.options.think_opened, {})))


class LanguagePlugin(Plugin):
    name = "r1-language"
    description = "R1 language-consistency reward: share of chain-of-thought words in the target language"

    @dataclass
    class Options:
        weight: float = 1.0
        target: str = "en"
        think_opened: bool = False

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        register(RewardFunction(self.name, LanguageScorer(o.target, o.think_opened), o.weight))


R1_ZERO_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with the "
    "answer. The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, "
    "respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>. "
    "User: {prompt}. Assistant:"
)


class R1ZeroTemplate(Plugin):
    """DeepSeek-R1-Zero's training template (Table 1 of the paper), as plain text."""

    name = "r1-zero-template"
    description = "DeepSeek-R1-Zero prompt template (plain text); optionally opens <think>"

    @dataclass
    class Options:
        open_think: bool = False

    @hookimpl
    def rlvr_render_prompt(self, example):
        prompt = example["prompt"]
        if not isinstance(prompt, str):
            prompt = "\n".join(m.get("content", "") for m in prompt if m.get("role") == "user")
        text = R1_ZERO_TEMPLATE.format(prompt=prompt)
        return text + " <think>" if self.options.open_think else text
