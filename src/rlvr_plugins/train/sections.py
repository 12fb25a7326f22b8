"""The config's sections as typed dataclasses: each key's type, rule and default, stated once.

Every section is checked by :mod:`rlvr_plugins.fields`, the checker of plugin ``Options``: a field's
annotation is what YAML may give for it, an ``Annotated`` :class:`~rlvr_plugins.fields.Rule` says what
else a valid value satisfies. A field whose default is ``None`` but whose annotation does not admit
``None`` is "not given": the stage that reads it derives its value (e.g. ``eval.max_new_tokens`` from
``trainer.max_completion_length``). Rules across fields (``model.name_or_path`` xor ``model.tiny``,
``eval.k`` against ``eval.n``) are the functions at the end.

Nothing here imports TRL or torch: :func:`section_problems` answers in milliseconds.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from .. import fields
from ..errors import shown
from ..fields import Rule

ANSWER_FORMATS = ("gsm8k", "boxed", "olympiadbench", "plain")
DTYPES = {"auto", "float32", "bfloat16", "float16"}
BACKENDS = ("transformers", "vllm")
PROMPTING_MODES = ("zero-shot", "few-shot", "cot")


def _one_of(choices, shown_as: str | None = None) -> Rule:
    return Rule(lambda v: v in choices, f"one of {shown_as or list(choices)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


Positive = Annotated[int, Rule(lambda v: v >= 1, "a positive integer")]
Flag = Annotated[bool, Rule(lambda v: True, "true or false")]
Mapping_ = Annotated[dict, Rule(lambda v: True, "a mapping")]
AnswerFormat = Annotated[str | None, Rule(lambda v: v is None or v in ANSWER_FORMATS, f"one of {list(ANSWER_FORMATS)}")]
Temperature = Annotated[float, Rule(lambda v: v >= 0, "a number >= 0")]
TopP = Annotated[float, Rule(lambda v: 0 < v <= 1, "in (0, 1]")]
Columns = Annotated[
    dict,
    Rule(
        lambda v: all(isinstance(c, str) for c in v.values()),
        "a mapping of canonical names (prompt, answer, ...) to dataset column names",
    ),
]
"""Annotations whose rule reads a module-level name are aliases defined here: ``typing.get_type_hints`` evaluates a
class's string annotations with the class namespace as globals, where a lambda would not find the module's names."""


# -- model --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoraSection:
    """``model.lora``: a LoRA adapter instead of full fine-tuning."""

    r: int = 16
    alpha: float = 32
    dropout: float = 0.05
    target_modules: str | list[str] = "all-linear"


@dataclass(frozen=True)
class ModelSection:
    """``model``: the policy, a hub id or local folder (``name_or_path``) or a tiny model built from scratch."""

    name_or_path: str = None  # type: ignore[assignment]
    tiny: Annotated[dict, Rule(lambda v: True, "a mapping of model config fields ({} for the defaults)")] = None  # type: ignore[assignment]
    tokenizer: str = None  # type: ignore[assignment]
    dtype: Annotated[str, _one_of(DTYPES, str(sorted(DTYPES)))] = "auto"
    lora: dict = None  # type: ignore[assignment]
    trust_remote_code: bool = False

    nested: ClassVar[dict[str, type]] = {"lora": LoraSection}


# -- data ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SplitSection:
    """``data.train`` / ``data.eval``: the keys of every source."""

    source: str
    limit: int | None = None
    answer_format: AnswerFormat = None
    columns: Columns = None  # type: ignore[assignment]

    required: ClassVar[str] = ""


@dataclass(frozen=True, kw_only=True)
class SyntheticSplit(SplitSection):
    """A synthetic task of :mod:`rlvr_plugins.demo` (or a plugin's)."""

    task: str = ""
    size: int = 1000
    seed: int = 0
    options: dict | None = None

    required: ClassVar[str] = "task"


@dataclass(frozen=True, kw_only=True)
class JsonlSplit(SplitSection):
    """A JSONL file, one problem a line."""

    path: str = ""

    required: ClassVar[str] = "path"


@dataclass(frozen=True, kw_only=True)
class HubSplit(SplitSection):
    """A Hugging Face dataset."""

    name: str = ""
    config: str | None = None
    split: str = "train"

    required: ClassVar[str] = "name"


SOURCES: dict[str, type[SplitSection]] = {"synthetic": SyntheticSplit, "jsonl": JsonlSplit, "hub": HubSplit}


@dataclass(frozen=True)
class DataSection:
    """``data``: the train split, optionally an eval split, column renames and the answer format of both
    (``data.<split>.columns`` and ``data.<split>.answer_format`` win for their split)."""

    train: SplitSection | None = None
    eval: SplitSection | None = None
    columns: Columns = field(default_factory=dict)
    answer_format: AnswerFormat = None


# -- sampling, eval, filter, distill -------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingOptions:
    """How completions are sampled (``eval``, ``filter``, ``distill``); each command states its own defaults
    in its section. ``temperature: 0`` is greedy decoding."""

    n: Positive = 1
    temperature: Temperature = 0.0
    top_p: TopP = 1.0
    max_new_tokens: Positive = 256
    batch_size: Positive = 16
    backend: Annotated[str, _one_of(BACKENDS)] = "transformers"
    vllm_options: Mapping_ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class _Scored:
    """Keys of every section that samples and scores: the split it reads and the reward that decides."""

    split: Annotated[str, Rule(lambda v: v in ("train", "eval"), "'train' or 'eval'")] = None  # type: ignore[assignment]
    reward: str | None = None
    threshold: float = 1.0


def _ks(v: Any) -> bool:
    return v is None or (bool(v) and all(_is_int(x) and x >= 1 for x in v))


@dataclass(frozen=True)
class EvalSection(SamplingOptions, _Scored):
    """``eval``: held-out accuracy in ``rlvr train`` (before, during and after GRPO) and in ``rlvr eval``.

    Defaults that depend on the command: ``max_new_tokens`` is ``trainer.max_completion_length`` when set
    (else 256 in ``rlvr train`` and 512 in ``rlvr eval``); ``batch_size`` is 64 in ``rlvr train``'s
    greedy evaluation and 16 in ``rlvr eval``; ``temperature`` is 0.6 in ``rlvr eval`` when ``n > 1``.
    """

    max_new_tokens: Positive = None  # type: ignore[assignment]
    batch_size: Positive = None  # type: ignore[assignment]
    temperature: Temperature = None  # type: ignore[assignment]
    every_steps: Annotated[
        int | None, Rule(lambda v: v is None or v >= 1, "a whole number of steps >= 1 (or absent)")
    ] = None
    integrity_window: Annotated[int, Rule(lambda v: v == 0 or v >= 2, "0 (off) or a number of evaluations >= 2")] = 3
    mode: Annotated[str, _one_of(PROMPTING_MODES)] = "zero-shot"
    shots: Annotated[int, Rule(lambda v: v >= 0, "a positive integer")] = 4
    shot_column: str = "solution"
    cot_instruction: str = "\nPlease reason step by step, and put your final answer within \\boxed{}."
    k: Annotated[list | None, Rule(_ks, "a non-empty list of positive integers")] = None
    format_reward: str | None = None
    breakdown: Annotated[list, Rule(lambda v: all(isinstance(c, str) for c in v), "a list of column names")] = None  # type: ignore[assignment]

    TRAIN_BATCH_SIZE: ClassVar[int] = 64
    COMMAND_BATCH_SIZE: ClassVar[int] = 16
    COMMAND_MAX_NEW_TOKENS: ClassVar[int] = 512
    SAMPLED_TEMPERATURE: ClassVar[float] = 0.6

    def in_train(self, max_completion_length: int) -> EvalSection:
        """The values of ``rlvr train``'s greedy evaluation (``max_completion_length``: the ``GRPOConfig``'s)."""
        return dataclasses.replace(
            self,
            max_new_tokens=self.max_new_tokens or max_completion_length,
            batch_size=self.batch_size or self.TRAIN_BATCH_SIZE,
        )

    def in_command(self, max_completion_length: int | None) -> EvalSection:
        """The values of ``rlvr eval`` (``max_completion_length``: ``trainer.max_completion_length`` if given)."""
        temperature = self.temperature
        if temperature is None:
            temperature = self.SAMPLED_TEMPERATURE if self.n > 1 else 0.0
        return dataclasses.replace(
            self,
            max_new_tokens=self.max_new_tokens or max_completion_length or self.COMMAND_MAX_NEW_TOKENS,
            batch_size=self.batch_size or self.COMMAND_BATCH_SIZE,
            temperature=temperature,
        )

    def sampling(self) -> SamplingOptions:
        """Only the sampling options (for :func:`rlvr_plugins.train.sampling.sample`)."""
        return SamplingOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SamplingOptions)})


Rate = Annotated[float, Rule(lambda v: 0 <= v <= 1, "in [0, 1]")]


EVAL_SETS = "a non-empty list of JSONL paths, {path, column, name} mappings or 'data.eval'"
Text = Annotated[str, Rule(lambda v: True, "a string")]


@dataclass(frozen=True)
class DecontaminateSection:
    """``filter.hygiene.decontaminate``: drop train prompts that overlap an eval set (n-grams)."""

    eval_sets: Annotated[list, Rule(bool, EVAL_SETS)] = None  # type: ignore[assignment]
    n: Annotated[int, Rule(lambda v: v >= 1, "an integer >= 1 (words per n-gram)")] = 13
    short_n: Annotated[int | None, Rule(lambda v: v is None or v >= 1, "an integer >= 1 and smaller than n")] = None
    threshold: Annotated[
        float, Rule(lambda v: 0 <= v < 1, "a number in [0, 1) (a prompt is dropped when its overlap is above it)")
    ] = 0.0


@dataclass(frozen=True)
class EvalSetSection:
    """One entry of ``filter.hygiene.decontaminate.eval_sets`` given as a mapping."""

    path: Any = None
    column: Text = None  # type: ignore[assignment]
    name: Text = None  # type: ignore[assignment]


@dataclass(frozen=True)
class HygieneSection:
    """``filter.hygiene``: drop problems a verifier cannot judge, and eval-set overlaps."""

    drop_multiple_choice: Flag = True
    drop_true_false: Flag = True
    decontaminate: dict = None  # type: ignore[assignment]  # a DecontaminateSection once checked
    examples: Annotated[int, Rule(lambda v: v >= 0, "an integer >= 0")] = 3


@dataclass(frozen=True)
class FilterSection(SamplingOptions, _Scored):
    """``rlvr filter``: hygiene, then difficulty filtering by pass rate over ``n`` samples per prompt."""

    n: Positive = 8
    temperature: Temperature = 1.0
    max_new_tokens: Positive = 1024
    min_pass_rate: Rate | None = None
    max_pass_rate: Rate | None = None
    drop_solved_without_cot: bool = False
    no_cot_instruction: str = "\nAnswer with the final answer only, without any explanation."
    no_cot_max_new_tokens: Positive = 32
    output: str = "filtered.jsonl"
    difficulty: Flag = True
    hygiene: dict = None  # type: ignore[assignment]

    def sampling(self) -> SamplingOptions:
        return SamplingOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SamplingOptions)})


@dataclass(frozen=True)
class DistillSection(SamplingOptions, _Scored):
    """``rlvr distill``: rejection sampling of teacher traces for an SFT set."""

    n: Positive = 4
    temperature: Temperature = 0.6
    top_p: TopP = 0.95
    max_new_tokens: Positive = 2048
    thresholds: Mapping_ = None  # type: ignore[assignment]
    max_per_prompt: Positive = 1
    output: str = "distill.jsonl"

    def sampling(self) -> SamplingOptions:
        return SamplingOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SamplingOptions)})


@dataclass(frozen=True)
class SFTExtra:
    """The ``sft`` keys of our own, beside any ``trl.SFTConfig`` field."""

    completion_column: str = "solution"
    examples: int | None = None


# -- checking ----------------------------------------------------------------------------------------

Where = Callable[[str], str]
"""``where("eval.n")``: the ``"file:line: "`` prefix of a dotted key, or ``""``."""


def unknown(what: str, key: Any, allowed: Any) -> str:
    """``unknown key in eval 'x'; did you mean n?`` (or the valid keys when none is close)."""
    allowed = list(allowed)
    close = difflib.get_close_matches(str(key), allowed, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; valid: {', '.join(sorted(allowed))}"
    if len(allowed) > 40 and not close:
        hint = "; see the documentation of that section for the valid keys"
    return f"unknown {what} {shown(key)}{hint}"


def problem_text(p: fields.Problem, name: str, where: Where) -> str:
    """A bad value found by :func:`rlvr_plugins.fields.check_fields`, as a config error naming ``name.key``:
    what a valid value is (a rule's text), or its type and the type given."""
    at = where(f"{name}.{p.key}")
    if p.kind == "rule":
        return f"{at}{name}.{p.key} must be {p.what}, got {shown(p.value)}"
    return f"{at}{name}.{p.key} must be {p.what}{p.finite}, got {shown(p.value)} ({type(p.value).__name__})"


def check_section(
    name: str, value: Any, annotations: Mapping[str, Any], where: Where, unknown_as: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The checked values of a mapping section, and its problems (unknown keys first named with the valid ones)."""
    if value is None:
        return {}, []
    if not isinstance(value, Mapping):
        return {}, [f"{name} must be a mapping, got {shown(value)}"]
    values, found = fields.check_fields(annotations, value)
    problems = []
    for p in found:
        if p.kind == "unknown":
            problems.append(where(f"{name}.{p.key}") + unknown(unknown_as or f"key in {name}", p.key, annotations))
        else:
            problems.append(problem_text(p, name, where))
    return values, problems


def build(cls: type, name: str, value: Any, where: Where) -> tuple[Any, list[str]]:
    """``(cls(**checked values), problems)``; the instance is built from the values that passed, and
    :func:`given` says which keys the config gave."""
    values, problems = check_section(name, value, fields.hints(cls), where)
    section = cls(**values)
    object.__setattr__(section, "_given", frozenset(values))
    return section, problems


def given(section: Any, key: str) -> bool:
    """Whether the config gave ``key`` of ``section`` (a ``null`` counts): for the few defaults that differ
    between "not given" and ``null`` (``eval.format_reward``)."""
    return key in getattr(section, "_given", ())


def defaults(cls: type) -> dict[str, Any]:
    """``{field: default}`` of a section (``None``: not given, derived by the stage that reads it)."""
    return {f.name: fields.default_of(f) for f in dataclasses.fields(cls)}


# -- rules across fields -------------------------------------------------------------------------------


def model_problems(model: Any, where: Where) -> tuple[ModelSection | None, list[str]]:
    if model is None:
        return None, ["model is missing: give model.name_or_path (hub id or local folder) or model.tiny"]
    if not isinstance(model, Mapping):
        return None, [f"model must be a mapping, got {shown(model)}"]
    section, problems = build(ModelSection, "model", model, where)
    if ("name_or_path" in model) == ("tiny" in model):
        problems.append("model needs exactly one of name_or_path (hub id or local folder) and tiny")
    if isinstance(model.get("tiny"), Mapping):
        problems += tiny_problems(model["tiny"], where)
    if section.lora is not None:
        lora, more = build(LoraSection, "model.lora", model["lora"], where)
        problems += more
        section = dataclasses.replace(section, lora=lora)
    return section, problems


TINY_SIZES = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
)
"""The sizes of ``model.tiny`` (a Qwen3 config): each, when given, a whole number >= 1."""


def tiny_problems(tiny: Mapping[str, Any], where: Where) -> list[str]:
    """A size of ``model.tiny`` that no model can have (0 or negative: torch fails after the SFT, not here).

    >>> for problem in tiny_problems({"hidden_size": 0, "head_dim": 16, "num_hidden_layers": 2.5}, lambda key: ""):
    ...     print(problem)
    model.tiny.hidden_size must be an integer >= 1, got 0
    model.tiny.num_hidden_layers must be an integer >= 1, got 2.5
    """
    return [
        f"{where(f'model.tiny.{key}')}model.tiny.{key} must be an integer >= 1, got {shown(tiny[key])}"
        for key in TINY_SIZES
        if key in tiny and not (_is_int(tiny[key]) and tiny[key] >= 1)
    ]


TRL_RULES: dict[str, Rule] = {
    "temperature": Rule(lambda v: v > 0, "a number > 0 (GRPO samples at this temperature; 0 divides by zero)"),
    "max_completion_length": Rule(lambda v: v is None or v >= 1, "an integer >= 1 (tokens per completion), or null"),
    "max_length": Rule(lambda v: v is None or v >= 1, "an integer >= 1 (tokens per example), or null"),
    "top_p": Rule(lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "top_k": Rule(lambda v: v is None or v >= 0, "an integer >= 0 (0: no top-k), or null"),
    "min_p": Rule(lambda v: v is None or 0 <= v <= 1, "a number in [0, 1], or null"),
    "repetition_penalty": Rule(lambda v: v > 0, "a number > 0 (1: none)"),
    "per_device_train_batch_size": Rule(lambda v: v >= 1, "an integer >= 1"),
    "gradient_accumulation_steps": Rule(lambda v: v >= 1, "an integer >= 1"),
    "num_iterations": Rule(lambda v: v >= 1, "an integer >= 1"),
    "steps_per_generation": Rule(lambda v: v is None or v >= 1, "an integer >= 1, or null"),
    "generation_batch_size": Rule(lambda v: v is None or v >= 1, "an integer >= 1, or null"),
    "learning_rate": Rule(lambda v: v >= 0, "a number >= 0"),
    "beta": Rule(lambda v: v >= 0, "a number >= 0 (0: no KL term)"),
    "epsilon": Rule(lambda v: v >= 0, "a number >= 0"),
}
"""Values of the right type that TRL's configs accept but that fail only once training runs (after the SFT): a
``trainer:`` or ``sft:`` field named here must also satisfy its rule."""


def trl_rule_problems(
    values: Mapping[str, Any], given: Mapping[str, Any], types: Mapping[str, Any]
) -> list[fields.Problem]:
    """A :class:`~rlvr_plugins.fields.Problem` for each value of a ``trainer:`` / ``sft:`` field (``values``:
    those of the field's type, converted; a wrong type is reported as such) that breaks its rule in
    :data:`TRL_RULES`; the value named is the one ``given``."""
    return [
        fields.Problem(key, given[key], "rule", Annotated[types[key], TRL_RULES[key]])
        for key, value in values.items()
        if key in TRL_RULES and key in types and not TRL_RULES[key].ok(value)
    ]


def data_problems(data: Any, where: Where) -> tuple[DataSection | None, list[str]]:
    if data is None:
        return None, ["data is missing: give data.train (and optionally data.eval)"]
    if not isinstance(data, Mapping):
        return None, [f"data must be a mapping, got {shown(data)}"]
    top = {k: v for k, v in data.items() if k not in ("train", "eval")}
    values, problems = check_section("data", top, {**fields.hints(DataSection), "train": Any, "eval": Any}, where)
    if "train" not in data:
        problems.append("data.train is missing")
    splits = {}
    for split in ("train", "eval"):
        spec = data.get(split)
        if spec is None:
            continue
        if not isinstance(spec, Mapping):
            problems.append(f"data.{split} must be a mapping with a source, got {shown(spec)}")
            continue
        cls = SOURCES.get(spec.get("source"))  # type: ignore[arg-type]
        if cls is None:
            problems.append(f"data.{split}.source must be one of {sorted(SOURCES)}, got {shown(spec.get('source'))}")
            continue
        splits[split], more = build(cls, f"data.{split}", spec, where)
        problems += more
        if cls.required not in spec:
            problems.append(f"data.{split}: source {spec['source']} needs {shown(cls.required)}")
    train, evaluation = splits.get("train"), splits.get("eval")
    if (
        isinstance(train, SyntheticSplit)
        and isinstance(evaluation, SyntheticSplit)
        and train.task == evaluation.task
        and (train.seed, train.options) != (evaluation.seed, evaluation.options)
    ):
        problems.append(
            "data.train and data.eval draw from the same synthetic task: give them the same seed and "
            "options, so that the eval problems are held out from the train problems"
        )
    return DataSection(**{**values, **splits}), problems


def sampling_problems(name: str, section: SamplingOptions, given: Mapping[str, Any]) -> list[str]:
    """``k`` against ``n``, and ``n > 1`` samples at temperature 0."""
    problems = []
    n, k = section.n, section.k if isinstance(section, EvalSection) else None
    if isinstance(k, list) and any(_is_int(x) and x > n for x in k):
        problems.append(f"{name}.k={k} asks for more samples than {name}.n={n}")
    if n > 1 and given.get("temperature", 1.0) == 0:
        problems.append(
            f"{name}.n={n} samples at temperature 0 would be {n} copies of the greedy answer; "
            f"set {name}.temperature > 0 or n: 1"
        )
    return problems


def hygiene_problems(
    section: FilterSection, data: Any, where: Where, exists: Callable[[str], str | None]
) -> tuple[HygieneSection | None, list[str]]:
    """``filter.hygiene`` and its ``decontaminate`` part; ``exists(path)`` is why a path is unusable, or None."""
    if section.hygiene is None:
        if section.difficulty is False:
            return None, [
                (
                    "filter.difficulty is false and there is no filter.hygiene section: nothing to filter; "
                    "add hygiene: {} (drop multiple-choice and true/false problems) or drop difficulty: false"
                )
            ]
        return None, []
    hygiene, problems = build(HygieneSection, "filter.hygiene", section.hygiene, where)
    if hygiene.decontaminate is not None:
        decontaminate, more = _decontaminate_problems(hygiene.decontaminate, data, where, exists)
        problems += more
        hygiene = dataclasses.replace(hygiene, decontaminate=decontaminate)
    return hygiene, problems


def _decontaminate_problems(
    value: Any, data: Any, where: Where, exists: Callable[[str], str | None]
) -> tuple[DecontaminateSection, list[str]]:
    at_ = "filter.hygiene.decontaminate"
    checked, problems = build(DecontaminateSection, at_, value, where)
    if _is_int(value.get("short_n")) and value["short_n"] >= checked.n >= 1:
        problems.append(f"{at_}.short_n must be an integer >= 1 and smaller than n={checked.n}, got {value['short_n']}")
    eval_sets = value.get("eval_sets")
    if "eval_sets" not in value:
        problems.append(f"{at_}.eval_sets must be {EVAL_SETS}, got None")
    if not isinstance(eval_sets, list) or not eval_sets:
        return checked, problems
    entries: list[Any] = []
    for i, spec in enumerate(eval_sets):
        at = f"{at_}.eval_sets[{i}]"
        if spec == "data.eval":
            if not isinstance(data, Mapping) or data.get("eval") is None:
                problems.append(f"{at} is 'data.eval' but the config has no data.eval")
            entries.append(spec)
            continue
        if isinstance(spec, Mapping):
            values, more = check_section(at, spec, fields.hints(EvalSetSection), where)
            problems += more
            entries.append(EvalSetSection(**values))
            path = spec.get("path")
        else:
            path = spec
            entries.append(spec)
        if not isinstance(path, str) or not path:
            problems.append(
                f"{at} must be a JSONL path, a mapping {{path, column, name}} or 'data.eval', got {shown(spec)}"
            )
        else:
            why = exists(path)
            if why:
                problems.append(f"{at}: eval set file {shown(path)} {why}")
    return dataclasses.replace(checked, eval_sets=entries), problems
