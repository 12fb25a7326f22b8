"""DeepSeek-R1's rule-based rewards as rlvr plugins (DeepSeek-AI 2025, §2.2.2 and §2.3.2)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rlvr_plugins import Plugin, RewardExploit, RewardFunction, hookimpl
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.text import message_text

from .answers import (
    CHECK_BUDGET_S,
    DEADLINE_MARGIN_S,
    MAX_NUMBER_DIGITS,
    TIME_BUDGET_S,
    TOO_MANY_DIGITS,
    UNPARSEABLE,
    accuracy,
    check_references,
)
from .format import format_score
from .language import TARGET_SCRIPTS, language_consistency, thinking_text

logger = logging.getLogger(__name__)


def reference_check(
    rows: Sequence[Mapping[str, Any]], column: str, plugin: str, compared: str, budget_s: float = CHECK_BUDGET_S
) -> list[tuple[int, str]]:
    """``rlvr_check_dataset`` for a reward that compares ``column`` with math-verify
    (``check_references``): ``(row, problem)`` for every reference math-verify can never parse,
    the problem saying how it is ``compared`` instead; references left unchecked when the
    budget ran out are logged (info) as a count."""
    references = [None if row.get(column) is None else str(row[column]) for row in rows]
    found, unchecked = check_references(references, budget_s=budget_s)
    if unchecked:
        logger.info(
            "%s: %d distinct references not checked at load (%g s budget spent); they are checked when scored",
            plugin,
            unchecked,
            budget_s,
        )
    problems = {
        TOO_MANY_DIGITS: f"the reference answer (column {column!r}) holds a number of more than {MAX_NUMBER_DIGITS} "
        f"digits, which math-verify cannot parse; it is {compared}",
        UNPARSEABLE: f"math-verify cannot parse the reference answer (column {column!r}); it is {compared}",
    }
    return [(index, problems[kind]) for index, kind in found]


@dataclass(frozen=True)
class AccuracyScorer:
    """1.0 if the final answer (outside the thinking part) equals the reference, symbolically."""

    answer_column: str = "answer"
    think_opened: bool = False
    fallback: str | None = "gsm8k"
    time_budget_s: float = TIME_BUDGET_S

    def __call__(self, *, prompt, completion, example):
        reference = example.get(self.answer_column)
        if reference is None:
            return None
        return accuracy(
            completion,
            str(reference),
            think_opened=self.think_opened,
            fallback=self.fallback,
            time_budget_s=self.time_budget_s,
        )


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
        time_budget_s: float = TIME_BUDGET_S

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        register(
            RewardFunction(
                self.name,
                AccuracyScorer(o.answer_column, o.think_opened, o.fallback, o.time_budget_s),
                o.weight,
                example=example_item(o.think_opened, {o.answer_column: "2"}),
                columns={"answer_column": o.answer_column},
            )
        )

    @hookimpl
    def rlvr_check_dataset(self, rows):
        return reference_check(
            rows, self.options.answer_column, self.name, "compared only as a plain decimal or as text"
        )

    @hookimpl
    def rlvr_validate_run(self, engine_timeout_s):
        budget = self.options.time_budget_s
        if not budget >= 1:
            raise ConfigError(
                f"plugin {self.name!r}: option time_budget_s={budget:g} must be at least 1 "
                f"(math-verify times out in whole seconds)",
                source="plugins",
            )
        if engine_timeout_s is not None and budget + DEADLINE_MARGIN_S > engine_timeout_s:
            raise ConfigError(
                f"plugin {self.name!r}: option time_budget_s={budget:g} (math-verify's time per answer) does not fit "
                f"under the reward engine's deadline engine.timeout_s={engine_timeout_s:g} with "
                f"{DEADLINE_MARGIN_S:g} s to spare (1 s for math-verify's whole-second timeouts, 2 s for the first "
                f"call's import of sympy): a slow answer would be masked instead of scored 0. Set time_budget_s to at "
                f"most {engine_timeout_s - DEADLINE_MARGIN_S:g} or raise engine.timeout_s.",
                source="plugins",
            )


def example_item(think_opened: bool, row: dict) -> dict:
    """A correct, well-formed completion of ``1+1=``: the item ``rlvr train --check`` scores once."""
    completion = "<think>1+1=2</think><answer>2</answer>"
    return {
        "prompt": "1+1=",
        "completion": completion.removeprefix("<think>") if think_opened else completion,
        "example": row,
    }


class FormatPlugin(Plugin):
    name = "r1-format"
    description = "R1 format reward: <think> reasoning </think> <answer> answer </answer>, content checked"

    @dataclass
    class Options:
        weight: float = 1.0
        think_opened: bool = False

    @hookimpl
    def rlvr_reward_functions(self, register):
        register(
            RewardFunction(
                self.name,
                FormatScorer(self.options.think_opened),
                self.options.weight,
                example=example_item(self.options.think_opened, {}),
            )
        )


class LanguagePlugin(Plugin):
    name = "r1-language"
    description = "R1 language-consistency reward: share of chain-of-thought words in the target language"

    @dataclass
    class Options:
        weight: float = 1.0
        target: str = "en"
        think_opened: bool = False

        def __post_init__(self):
            if self.target not in TARGET_SCRIPTS:
                raise ValueError(f"target must be one of {', '.join(sorted(TARGET_SCRIPTS))}, got {self.target!r}")

    @hookimpl
    def rlvr_reward_functions(self, register):
        o = self.options
        example = example_item(o.think_opened, {})
        example["completion"] = example["completion"].replace("1+1=2", "one plus one makes two")
        register(RewardFunction(self.name, LanguageScorer(o.target, o.think_opened), o.weight, example=example))

    @hookimpl
    def rlvr_reward_exploits(self, register):
        o = self.options
        register(
            RewardExploit(
                self.name,
                "encoded-script",
                EncodedScript(o.target, o.think_opened),
                "a chain of thought in another language, written as HTML entities or TeX \\char codes",
            )
        )


FOREIGN_THOUGHT = {
    "en": "我们先计算这个问题然后检查答案",
    "other": "first we compute the sum and then check the answer",
}


def encodings(text: str) -> list[str]:
    """``text`` as decimal and hexadecimal HTML entities and as TeX ``\\char`` codes.

    >>> encodings("我a")
    ['&#25105;&#97;', '&#x6211;&#x61;', '\\\\char25105\\\\char97']
    """
    return [
        "".join(f"&#{ord(c)};" for c in text),
        "".join(f"&#x{ord(c):x};" for c in text),
        "".join(f"\\char{ord(c)}" for c in text),
    ]


@dataclass(frozen=True)
class EncodedScript:
    """``rlvr audit rewards``: thinking in a language other than ``target``, encoded so that no letter of it shows."""

    target: str = "en"
    think_opened: bool = False

    def __call__(self, row):
        thought = FOREIGN_THOUGHT["en" if self.target == "en" else "other"]
        head = "" if self.think_opened else "<think>"
        answer = row.get("answer") or "42"
        return [f"{head}{encoded}</think> <answer>{answer}</answer>" for encoded in encodings(thought)]


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
        prompt = message_text(example["prompt"], roles=("user",))
        text = R1_ZERO_TEMPLATE.format(prompt=prompt)
        return text + " <think>" if self.options.open_think else text
