"""``RLVRTrainer``: TRL's ``GRPOTrainer`` with every hook wired in, and nothing else changed.

Where each hook fires (see ``docs/architecture.md``):

* ``rlvr_train_sampler``: ``_get_train_sampler``, once, when the dataloader is built.
* ``rlvr_reward_functions``, ``rlvr_environments``, ``rlvr_validate_run``: ``__init__``; each reward
  becomes a TRL reward function, the environments TRL's ``environment_factory``, then every plugin
  may refuse the run. TRL's ``scale_rewards`` and
  ``multi_objective_aggregation`` choose the estimator when no estimator plugin is enabled
  (:func:`trl_estimator`).
* ``rlvr_rollout_func``: ``__init__``; when a plugin answers, it is TRL's ``rollout_func``.
* ``rlvr_trainer_callbacks``: the end of ``__init__``; each callback is added to the trainer.
* ``rlvr_length_penalty``, ``rlvr_compute_advantages``, ``rlvr_on_rewards``: after TRL
  has generated, scored and gathered a batch (``_generate_and_score_completions``); the
  advantages computed here on the gathered batch replace TRL's, sliced to this process.
* ``rlvr_select_groups``: when a plugin implements it, ``_generate_and_score_completions`` runs the
  rollout pool (:meth:`RLVRTrainer._pooled_batch`): generation rounds until the plugin chooses the batch;
  ``rlvr_pool_started`` fires before each round generates, ``rlvr_on_rewards`` once per round after it (with
  partial rollouts, on its finished groups). Without one, TRL's step is untouched.
* ``rlvr_state_dict`` / ``rlvr_load_state_dict``: ``_save_checkpoint`` and ``train`` (with the pool's contents).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from accelerate.utils import gather, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints
from trl import GRPOConfig, GRPOTrainer

from .advantages import BatchAdvantages, batch_advantages, ratio_statistics
from .builtin.estimators import TRL_SCALE_ESTIMATORS
from .builtin.repetition import repeated_ngram_share
from .checkpoints import (
    PLUGIN_STATE_FILE,
    checkpoint_bytes_estimate,
    folder_bytes,
    innermost_optimizer,
    last_complete_checkpoint,
    writing,
)
from .engine import RewardPluginFailing
from .episodes import (
    MAX_RESULT_CHARS,
    TOOL_TIMEOUT_S,
    UNPARSABLE_TOOL,
    bounded_tool,
    episode_stats,
    refuse_unparsable,
    reward_by_turns,
    tool_call_marker,
    unparsable_call,
)
from .errors import ConfigError, PluginConflictError, PluginContractError, PluginError, shown
from .manager import PluginSet, build_plugin_set
from .outputs import write_atomic
from .rewards import (
    MAX_NOT_APPLICABLE,
    EngineAdapter,
    Engines,
    TRLBatchReward,
    TRLReward,
    engine_options_argument,
    not_applicable_shares,
    row_columns,
    unread_columns,
)
from .rollout_pool import (
    GroupSelection,
    PooledGroup,
    PromptRecord,
    RolloutPool,
    StepCounts,
    replace_prompts,
    trim_rows,
)
from .segment_plan import segment_conflict
from .segments import (
    BEHAVIOUR,
    TOKEN_STEP,
    Continuations,
    Member,
    PendingGroup,
    SegmentPlan,
    StaleLoss,
    extend_steps,
    finished,
    join_segments,
    prefix_logprobs,
    ready_first_selection,
    stale_tokens,
    stale_weights,
)
from .turns import check_turns, refuse_text_prompts

logger = logging.getLogger(__name__)

#: The keys of the rollout pool's contents and of its per-prompt record in a checkpoint's plugin-state file
#: (plugin names start with no underscore).
POOL_STATE_KEY = "_rollout_pool"
RECORD_STATE_KEY = "_prompt_record"
PARTIAL_STATE_KEY = "_partial_rollouts"
#: TRL's per-completion-token batch fields: trimmed to each completion's length in the pool, right-padded again.
TOKEN_FIELDS = (
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
)
PROMPT_FIELDS = ("prompt_ids", "prompt_mask")

TRL_NO_SCORE_WARNING = "All reward functions returned None"


def no_score_warning(n_unscored: int, n_total: int, undecided: int, failures: Mapping[str, int]) -> str:
    """The batch's one warning on completions without a score: how many, and why. When no reward applied to any of
    them (every one returned None) it starts with TRL's own words (:data:`TRL_NO_SCORE_WARNING`); otherwise it names
    each reward that failed (raised, timed out or returned no usable value) and on how many completions, since one
    failing reward leaves a completion out even where the other rewards scored it.

    >>> print(no_score_warning(3, 8, 0, {"r1-accuracy": 0, "judge": 3}))  # doctest: +NORMALIZE_WHITESPACE
    3 of 8 completions of this batch have no score: reward 'judge' failed (raised, timed out or returned no usable
    value) on 3, which leaves them out even where the other rewards scored them: their advantage is 0 and they are
    left out of their group's baseline. Counted in rlvr/frac_no_score and rlvr/failed/<reward>; this warning is
    not repeated.
    >>> no_score_warning(8, 8, 8, {"a": 0}).split(": their")[0]
    'All reward functions returned None for 8 of 8 completions of this batch: they could not be scored by any reward'
    """
    nothing = "; no completion of the batch has a score" if n_unscored == n_total else ""
    tail = (
        f": their advantage is 0 and they are left out of their group's baseline{nothing}. Counted in "
        "rlvr/frac_no_score and rlvr/failed/<reward>; this warning is not repeated."
    )
    if undecided == n_unscored:
        return (
            f"{TRL_NO_SCORE_WARNING} for {n_unscored} of {n_total} completions of this batch: they could not be "
            f"scored by any reward{tail}"
        )
    failed = [f"{name!r} on {count}" for name, count in failures.items() if count]
    which = ("reward " if len(failed) == 1 else "rewards ") + ", ".join(failed)
    which = which.replace(" on ", " failed (raised, timed out or returned no usable value) on ", 1)
    others = " even where the other rewards scored them" if len(failures) > 1 else ""
    reasons = [f"{which}, which leaves them out{others}"]
    if undecided:
        reasons.append(f"{undecided} could not be scored by any reward (every reward returned None)")
    return f"{n_unscored} of {n_total} completions of this batch have no score: {'; '.join(reasons)}{tail}"


class _TRLNoScoreFilter(logging.Filter):
    """Drop TRL's per-batch warning for rows no reward scored (it prints the whole row, every
    batch); the trainer warns once itself and counts them in ``rlvr/frac_no_score``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return TRL_NO_SCORE_WARNING not in str(record.msg)


@contextlib.contextmanager
def _quiet_trl_no_score_warning():
    """Filter TRL's "All reward functions returned None" warning while this trainer scores a batch, and only then."""
    trl_logger = logging.getLogger("trl.trainer.grpo_trainer")
    quiet = _TRLNoScoreFilter()
    trl_logger.addFilter(quiet)
    try:
        yield
    finally:
        trl_logger.removeFilter(quiet)


def trl_estimator(grpo_args) -> str:
    """The built-in estimator that computes TRL's advantages for ``grpo_args``.

    ``multi_objective_aggregation="normalize_then_sum"`` → ``normalize-then-sum`` (TRL ignores
    ``scale_rewards`` there); otherwise ``scale_rewards`` ``"group"`` → ``grpo``, ``"batch"`` →
    ``batch-std``, ``"none"`` → ``mean-baseline``.
    """
    if grpo_args.multi_objective_aggregation == "normalize_then_sum":
        return "normalize-then-sum"
    if grpo_args.multi_objective_aggregation != "sum_then_normalize":
        raise PluginError(
            f"multi_objective_aggregation={grpo_args.multi_objective_aggregation!r} is not supported; "
            "supported: ['sum_then_normalize', 'normalize_then_sum']"
        )
    if grpo_args.scale_rewards not in TRL_SCALE_ESTIMATORS:
        raise PluginError(
            f"scale_rewards={grpo_args.scale_rewards!r} is not supported; supported: {list(TRL_SCALE_ESTIMATORS)}"
        )
    return TRL_SCALE_ESTIMATORS[grpo_args.scale_rewards]


def with_trl_estimator(plugin_set: PluginSet, grpo_args) -> PluginSet:
    """Map TRL's advantage settings onto the estimator, or refuse a contradiction; never ignore them.

    No estimator plugin enabled (the default ``grpo`` answers): the built-in estimator of
    :func:`trl_estimator` answers instead. An enabled estimator decides, and TRL's settings
    must be their defaults or agree with it (e.g. ``dr-grpo`` with ``scale_rewards="none"``).
    """
    wanted = trl_estimator(grpo_args)
    current = plugin_set.winner("rlvr_compute_advantages")
    if current == wanted or getattr(type(plugin_set.get(current)), "alias_of", None) == wanted:
        return plugin_set
    if plugin_set.is_default(current):
        return plugin_set.replace_default("rlvr_compute_advantages", wanted)
    if wanted == "grpo":  # TRL's defaults: the enabled estimator decides
        return plugin_set
    if wanted != "normalize-then-sum" and type(plugin_set.get(current)).trl_scale_rewards == grpo_args.scale_rewards:
        return plugin_set
    raise PluginError(
        f"scale_rewards={grpo_args.scale_rewards!r}, multi_objective_aggregation="
        f"{grpo_args.multi_objective_aggregation!r} ask for the {wanted!r} estimator, but the estimator plugin "
        f"{current!r} is enabled and computes the advantages; enable {wanted!r} instead, or leave "
        "scale_rewards and multi_objective_aggregation at their defaults"
    )


def default_grpo_config(model) -> GRPOConfig:
    """What ``GRPOTrainer`` builds without ``args``: ``GRPOConfig("<model name>-GRPO")``."""
    name = model if isinstance(model, str) else getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    return GRPOConfig(f"{name.split('/')[-1]}-GRPO")


def adjust_grpo_args(plugin_set: PluginSet, args: GRPOConfig) -> None:
    """Apply the plugins' ``rlvr_adjust_grpo_config`` to a ``GRPOConfig`` built elsewhere (a script),
    so it matches what ``rlvr train`` builds from a config with the same plugins.

    The fields the caller set (those that differ from a fresh ``GRPOConfig`` for the same
    ``output_dir``) are the plugins' ``trainer_section``. A field a plugin changes is set on
    ``args`` when the caller left it at its default; a caller's value that contradicts the
    plugin is an error naming the plugin, the field, the given and the required value.
    Arguments built by :func:`rlvr_plugins.train.run.prepare` (already adjusted) are left alone.
    """
    import dataclasses

    if plugin_set.adjusted_args is args or not plugin_set.implementers("rlvr_adjust_grpo_config"):
        return
    fresh = GRPOConfig(output_dir=args.output_dir, use_cpu=args.use_cpu)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.init}
    chosen = {k: v for k, v in given.items() if k != "output_dir" and not _equal(v, getattr(fresh, k, None))}
    kwargs = dict(given)
    owners = plugin_set.adjust_grpo_config(kwargs, chosen)
    for key, plugin in owners.items():
        value = kwargs[key]
        if _equal(given.get(key), value):
            continue
        if key in chosen:
            raise PluginError(
                f"plugin {plugin!r} requires GRPOConfig {key}={value!r}, but the GRPOConfig given has "
                f"{key}={given[key]!r}; leave {key} at its default or set it to {value!r}"
            )
        setattr(args, key, value)
    plugin_set.adjusted_args = args


def check_reward_columns(registered, dataset: Any) -> bool:
    """Refuse a ``train_dataset`` in which a reward can read nothing (:func:`~rlvr_plugins.rewards.unread_columns`),
    naming the reward, the column and the columns present. Returns False when the dataset cannot be
    checked here (an ``IterableDataset``): the first batch is checked instead."""
    from datasets import Dataset

    if not isinstance(dataset, Dataset):
        return False
    present = list(dataset.column_names)
    problems = unread_columns(
        registered, present, lambda column: any(v is not None for v in dataset[column]), "train_dataset"
    )
    if problems:
        raise PluginError("; ".join(problems))
    return True


def plugin_set_argument(plugin_set: Any) -> PluginSet:
    """``RLVRTrainer``'s ``plugin_set``: a :class:`PluginSet` (default: the built-in defaults only), or a
    :class:`PluginError` saying what to pass instead."""
    if plugin_set is None:
        return build_plugin_set(None)
    if isinstance(plugin_set, PluginSet):
        return plugin_set
    hint = (
        f"; pass the mapping as plugins={shown(plugin_set)}, or build one with build_plugin_set({shown(plugin_set)})"
        if isinstance(plugin_set, Mapping)
        else "; pass plugins={plugin name: options}, or build one with build_plugin_set({plugin name: options})"
    )
    raise PluginError(
        f"plugin_set must be a PluginSet (rlvr_plugins.manager.build_plugin_set), got "
        f"{type(plugin_set).__name__} {shown(plugin_set)}{hint}"
    )


def _equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def trl_reward_names(reward_funcs: Sequence[Any]) -> list[str]:
    """The names ``GRPOTrainer`` gives ``reward_funcs`` (its metrics' ``rewards/<name>``): a reward model's id
    without its folders, or the callable's name."""
    from torch import nn
    from trl.trainer.utils import get_callable_name, get_config_model_id

    return [
        f.split("/")[-1]
        if isinstance(f, str)
        else get_config_model_id(cast(Any, f).config).split("/")[-1]
        if isinstance(f, nn.Module)
        else get_callable_name(f)
        for f in reward_funcs
    ]


def check_reward_names(trl_names: Sequence[str], registered: Sequence[tuple[str, Any]]) -> None:
    """Refuse a function of ``reward_funcs`` named like a plugin's reward (their metrics and columns would clash),
    naming the plugin."""
    owners = {reward.name: owner for owner, reward in registered}
    clash = next((name for name in trl_names if name in owners), None)
    if clash is not None:
        raise PluginConflictError(
            "rlvr_reward_functions",
            [owners[clash]],
            f"reward name {clash!r} is both a function of reward_funcs and a reward of plugin "
            f"{owners[clash]!r}; reward names must be unique (rename the function)",
        )


def _is_module(obj: Any) -> bool:
    from torch import nn

    return isinstance(obj, nn.Module)


def merged_reward_weights(given: Sequence[float] | None, trl_count: int, plugin_weights: list[float]) -> list[float]:
    """``reward_weights`` for TRL's reward functions (first) and the plugins' rewards (after them).

    ``given`` is ``GRPOConfig.reward_weights``: one weight per TRL reward function (TRL's rule; the
    plugins' weights are appended), or one per reward of both kinds whose plugin part equals the
    plugins' own weights (a ``GRPOConfig`` already used by a trainer). Anything else is a ``ValueError``
    in TRL's words, then ours.

    >>> merged_reward_weights(None, 2, [0.5])
    [1.0, 1.0, 0.5]
    >>> merged_reward_weights([2.0], 1, [0.5])
    [2.0, 0.5]
    """
    if given is None:
        return [1.0] * trl_count + plugin_weights
    given = [float(w) for w in given]
    if trl_count == 0 and given != plugin_weights:
        raise PluginError(
            f"trainer.reward_weights={given} contradicts the plugins' weights {plugin_weights}; "
            "set each reward's weight in its plugin options and remove trainer.reward_weights"
        )
    if len(given) == trl_count:
        return given + plugin_weights
    if len(given) == trl_count + len(plugin_weights) and given[trl_count:] == plugin_weights:
        return given
    raise ValueError(
        f"Number of reward weights ({len(given)}) must match number of reward functions ({trl_count}); "
        f"RLVRTrainer: reward_weights holds one weight per function of reward_funcs, the plugins' rewards "
        f"take theirs from their options ({plugin_weights})"
    )


def trl_processing_classes(classes: Any, trl_count: int) -> list[Any]:
    """``reward_processing_classes`` as TRL reads it: ``None``, one, or a list as long as ``reward_funcs``."""
    if classes is None:
        return [None] * trl_count
    classes = classes if isinstance(classes, list) else [classes]
    if len(classes) != trl_count:
        raise ValueError(
            f"The number of reward processing classes ({len(classes)}) must match the number of "
            f"reward functions ({trl_count})."
        )
    return classes


_GRPO_PARAMETERS = list(inspect.signature(GRPOTrainer.__init__).parameters)[4:]  # after self, model, reward_funcs, args


class RLVRTrainer(GRPOTrainer):
    """``GRPOTrainer``, constructor included, whose advantages, penalties and sampler come from plugins.

    A TRL script changes only its import line: every argument of ``GRPOTrainer`` means what it means
    there. ``reward_funcs`` (TRL batch functions, sync or async; reward-model ids or ``PreTrainedModel``
    objects with ``reward_processing_classes``) are called by TRL itself, once per batch, in this process, with
    TRL's failure behaviour (an exception stops training; ``None`` means no score); the plugins' rewards
    come after them, and ``args.reward_weights`` weighs the TRL functions (the plugins' weights are appended).

    :param plugins: the plugins to enable, by name, as the YAML's ``plugins:`` section
        (``{"dr-grpo": {}, "kimi-length": {"weight": 0.5}}``); built with :func:`build_plugin_set`.
    :param plugin_set: the same, already built (give one of the two); default: the built-in defaults only.
    :param args: the ``GRPOConfig``; default as in TRL, ``GRPOConfig("<model name>-GRPO")``. The
        plugins' ``rlvr_adjust_grpo_config`` is applied to it (:func:`adjust_grpo_args`), as ``rlvr train`` does.
        Its ``scale_rewards`` / ``multi_objective_aggregation`` choose the estimator when no
        estimator plugin is enabled (:func:`with_trl_estimator`).
    :param isolate_reward_funcs: run the functions of ``reward_funcs`` through the reward engine
        (:class:`~rlvr_plugins.rewards.TRLBatchReward`): each batch is one engine job, in a worker process
        (unless ``engine_options`` has ``in_process``), with ``timeout_s`` as the deadline of the whole call.
        Default ``False``: TRL calls them in this process. Reward models stay in this process either way.
    :param engines: the reward engines (default: built from ``engine_options``).
    :param engine_options: ``RewardEngine`` options for the default engines; ``on_error``
        defaults to ``"raise"`` here (a reward that raises stops training, as in TRL);
        ``rlvr train`` passes the config's ``engine.on_error`` (default ``"mask"``).
    :param correctness_reward: the reward whose value ``>= correct_threshold`` means
        *correct* in the logged metrics (response length of correct and wrong completions,
        correct rate); default the first reward (TRL's first, else the plugins' first).
    Every other argument is passed to ``GRPOTrainer`` unchanged.
    """

    args: GRPOConfig
    # GRPOConfig's Optional sizes, as GRPOTrainer resolves them in its __init__ (always set afterwards)
    num_generations: int
    num_generations_eval: int

    def __init__(
        self,
        model=None,
        reward_funcs=None,
        args=None,
        *positional: Any,
        plugins: Mapping[str, Any] | None = None,
        plugin_set: PluginSet | None = None,
        engines: Engines | None = None,
        engine_options: dict[str, Any] | None = None,
        isolate_reward_funcs: bool = False,
        correctness_reward: str | None = None,
        correct_threshold: float = 1.0,
        **kwargs: Any,
    ):
        if len(positional) > len(_GRPO_PARAMETERS):
            raise TypeError(
                f"RLVRTrainer takes at most {3 + len(_GRPO_PARAMETERS)} positional arguments, as GRPOTrainer"
            )
        for name, value in zip(_GRPO_PARAMETERS, positional):
            if name in kwargs:
                raise TypeError(f"RLVRTrainer got multiple values for argument {name!r}")
            kwargs[name] = value
        if plugins is not None and plugin_set is not None:
            raise TypeError(
                "RLVRTrainer takes plugins= (the plugins by name, as the YAML's plugins: section) or plugin_set= "
                "(a built PluginSet), not both"
            )
        if args is None:
            args = default_grpo_config(model)
        trl_funcs = (
            [] if reward_funcs is None else list(reward_funcs) if isinstance(reward_funcs, list) else [reward_funcs]
        )
        trl_classes = trl_processing_classes(kwargs.pop("reward_processing_classes", None), len(trl_funcs))
        plugin_set = build_plugin_set(plugins) if plugin_set is None else plugin_set_argument(plugin_set)
        adjust_grpo_args(plugin_set, args)
        plugin_set = with_trl_estimator(plugin_set, args)
        self.plugin_set = plugin_set
        self.engines = (
            engines
            if engines is not None
            else Engines(**{"on_error": "raise", **engine_options_argument(engine_options, "engine_options")})
        )
        registered = plugin_set.reward_functions()
        plugin_environments = plugin_set.environment_factory()
        if plugin_environments is not None:
            if kwargs.get("environment_factory") is not None:
                owners = sorted({owner for owner, _ in plugin_set.environments()})
                raise TypeError(
                    f"plugin(s) {', '.join(map(repr, owners))} provide the environments (rlvr_environments); do not "
                    "also pass environment_factory: register that environment from a plugin instead"
                )
            kwargs["environment_factory"] = plugin_environments
        trl_names = trl_reward_names(trl_funcs)
        plugin_names = [r.name for _, r in registered]
        check_reward_names(trl_names, registered)
        plugin_set.validate_run(
            args,
            self.engines.settings().deadline_s,
            environment_factory=kwargs.get("environment_factory"),
            other_rewards=trl_names,
            tools=kwargs.get("tools"),
        )
        self.rlvr_rewards: list[Any] = [TRLReward(reward, owner, self.engines) for owner, reward in registered]
        self._rlvr_columns_checked = check_reward_columns(registered, kwargs.get("train_dataset"))
        self._warned_not_applicable: set[str] = set()
        if isolate_reward_funcs:
            if kwargs.get("environment_factory") is not None:
                raise TypeError(
                    "isolate_reward_funcs=True cannot be combined with environment_factory: the environments live "
                    "in the trainer's process; leave isolate_reward_funcs at False"
                )
            trl_funcs = [
                f if isinstance(f, str) or _is_module(f) else TRLBatchReward(f, name, self.engines)
                for f, name in zip(trl_funcs, trl_names)
            ]
        self._rlvr_adapters: list[Any] = [f for f in trl_funcs if isinstance(f, TRLBatchReward)] + self.rlvr_rewards
        args.reward_weights = (
            merged_reward_weights(args.reward_weights, len(trl_funcs), [float(r.weight) for _, r in registered]) or None
        )
        self._rlvr_batch: dict[str, torch.Tensor] = {}
        self._warned_no_score = False
        self._rlvr_base_weights: torch.Tensor | None = None
        self._warned_checkpoint_bytes = False
        self._rlvr_capture_logps, self._rlvr_logps = False, None
        names = trl_names + plugin_names
        self.correctness_reward = correctness_reward or (names[0] if names else None)
        if self.correctness_reward is not None and self.correctness_reward not in names:
            raise PluginError(
                f"correctness_reward {self.correctness_reward!r} is not a registered reward; registered: {names}"
            )
        self.correct_threshold = float(correct_threshold)
        rollout = plugin_set.answer(
            "rlvr_rollout_func",
            tokenizer=kwargs.get("processing_class"),
            num_generations=args.num_generations,
            grpo_args=args,
        )
        if rollout is not None:
            if kwargs.get("rollout_func") is not None:
                raise TypeError(f"plugin {rollout[0]!r} provides the rollout_func; do not also pass rollout_func")
            if kwargs.get("tools") or kwargs.get("environment_factory") is not None:
                raise ConfigError(
                    "it provides TRL's rollout_func (rlvr_rollout_func), which TRL 1.16 cannot combine with tools: "
                    "its tool loop generates only the first turn with the rollout_func and every later turn itself, "
                    "and builds the tool mask itself (the rollout's env_mask is dropped, so tokens the rollout "
                    "inserted would be trained on); turn that option of the plugin off for a run with tools",
                    source=f"plugins.{rollout[0]}",
                )
            kwargs["rollout_func"] = rollout[1]
        tokenizer = kwargs.get("processing_class")
        if kwargs.get("tools") or kwargs.get("environment_factory") is not None:
            refuse_text_prompts(kwargs.get("train_dataset"), plugin_set.winner("rlvr_render_prompt"))
            for warning in check_turns(tokenizer, args.chat_template_kwargs) if tokenizer is not None else ():
                logger.warning("chat template: %s", warning)
        super().__init__(
            model=model,
            reward_funcs=trl_funcs + self.rlvr_rewards,
            args=args,
            reward_processing_classes=trl_classes + [None] * len(self.rlvr_rewards),
            **kwargs,
        )
        if self.use_vllm:
            from .vllm_cpu import install_cpu_weight_sync

            install_cpu_weight_sync(self)  # TRL's colocated sync cannot write into vLLM-CPU's packed weights
        self._rlvr_tool_marker = tool_call_marker(self.processing_class) if self.tools else None
        environments = [environment for _, environment in plugin_set.environments()]
        self._rlvr_tool_bounds = {  # TRL's key of each environment (None when there is one): answer cap, deadline
            (e.name if len(environments) > 1 else None): (e.max_result_chars, e.tool_timeout_s) for e in environments
        }
        self._rlvr_episodes: tuple[list[int], list[int]] | None = None  # this batch's (turns, policy tokens)
        self._rlvr_segments = self._segment_plan(args)
        self._rlvr_continuations = Continuations(self.num_generations) if self._rlvr_segments else None
        self._rlvr_prefixes: list[Member] | None = None  # this round's local rows, when continuing
        self._rlvr_pool = self._new_pool(kwargs.get("train_dataset"))
        self._rlvr_record = PromptRecord()
        self._rlvr_positions: dict[int, int] | None = None
        for _, callbacks in plugin_set.call("rlvr_trainer_callbacks", trainer=self):
            for callback in callbacks or ():
                self.add_callback(callback)

    # -- sampler -----------------------------------------------------------------
    def _get_train_sampler(self, dataset=None):
        dataset = self.train_dataset if dataset is None else dataset
        return self.plugin_set.one(
            "rlvr_train_sampler",
            dataset=dataset,
            num_generations=self.num_generations,
            prompts_per_batch=cast(int, self.args.generation_batch_size) // self.num_generations,
            repeat_count=self.num_iterations * cast(int, self.args.steps_per_generation),
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
            grpo_args=self.args,
        )

    # -- episodes with tools (TRL's tool loop) ---------------------------------------
    def _generate(self, prompts):
        """TRL's generation and tool loop, with a tool call it cannot parse answered as an error turn
        (:func:`~rlvr_plugins.episodes.unparsable_call`) and the episodes' numbers logged.

        TRL 1.16 offers no seam for the parser: ``_generate`` and ``_tool_call_loop`` call the module-level
        ``trl.trainer.grpo_trainer.parse_response`` directly. So that name is bound to a wrapper for this
        batch only and restored in a ``finally`` (an exception in the batch included). TRL calls the parser
        from the thread that runs ``_generate`` (its tools run on its asyncio loop, which never parses), so
        one trainer per process is safe; two trainers generating at once in threads of one process are not."""
        if not self.tools:
            return super()._generate(prompts)
        from trl.trainer import grpo_trainer

        trl_parse = grpo_trainer.parse_response
        unparsable = 0

        def parse(tokenizer, ids, prefix=None, tools=None):
            nonlocal unparsable
            parsed = trl_parse(tokenizer, ids, prefix=prefix, tools=tools)
            replaced = unparsable_call(parsed, self._rlvr_tool_marker)
            unparsable += replaced is not None
            return parsed if replaced is None else replaced

        batch_environments = getattr(self, "_batch_environments", None) or [None] * len(self._sync_tool_dicts)
        for tools, environment in zip(
            zip(self._sync_tool_dicts, self._async_tool_dicts, strict=True), batch_environments, strict=True
        ):
            cap, timeout = self._rlvr_tool_bounds.get(environment, (MAX_RESULT_CHARS, TOOL_TIMEOUT_S))
            for tool_dict in tools:
                tool_dict.update({name: bounded_tool(tool, cap, timeout) for name, tool in tool_dict.items()})
            tools[0][UNPARSABLE_TOOL] = refuse_unparsable
        grpo_trainer.parse_response = parse  # TRL's parser, seen through unparsable_call, for this batch only
        try:
            output = super()._generate(prompts)
        finally:
            grpo_trainer.parse_response = trl_parse
        tool_mask, completions = output[2], output[3]
        self._log_episodes(episode_stats(completions, tool_mask), unparsable)
        return output

    def _log_episodes(self, stats, unparsable: int) -> None:
        """``tools/*`` and ``tokens/*`` per episode, over every process's episodes (TRL logs
        ``tools/call_frequency`` and ``tools/failure_frequency``)."""
        self._rlvr_episodes = (stats.turns, stats.policy_tokens)
        local = torch.tensor(
            [[t, p, o] for t, p, o in zip(stats.turns, stats.policy_tokens, stats.tool_tokens, strict=True)],
            dtype=torch.float,
            device=self.accelerator.device,
        ).view(-1, 3)
        rows = self._gather(local)
        counted = [(stats.calls, stats.errors, unparsable, stats.timeouts)]
        if self.accelerator.num_processes > 1:
            counted = gather_object(counted)
        episodes = max(1, rows.shape[0])
        metrics = self._metrics["train" if self.model is not None and self.model.training else "eval"]
        turns, policy, tool = rows.mean(dim=0).tolist() if rows.numel() else (0.0, 0.0, 0.0)
        metrics["tools/turns_mean"].append(turns)
        metrics["tools/turns_max"].append(float(rows[:, 0].max()) if rows.numel() else 0.0)
        metrics["tokens/policy_mean"].append(policy)
        metrics["tokens/tool_mean"].append(tool)
        metrics["tools/unparsable_frequency"].append(sum(n for _, _, n, _ in counted) / episodes)
        names = sorted({name for calls, _, _, _ in counted for name in calls})
        for name in names:
            metrics[f"tools/calls/{name}"].append(sum(calls[name] for calls, _, _, _ in counted) / episodes)
            metrics[f"tools/errors/{name}"].append(sum(errors[name] for _, errors, _, _ in counted) / episodes)
            metrics[f"tools/timeouts/{name}"].append(sum(late[name] for _, _, _, late in counted) / episodes)

    # -- rewards, penalties, advantages --------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        for reward in self._rlvr_adapters:
            reward.pending_error = None
        with _quiet_trl_no_score_warning():
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._raise_on_every_rank()
        device = rewards_per_func.device
        columns = [f.last_failed if isinstance(f, EngineAdapter) else [False] * len(prompts) for f in self.reward_funcs]
        failed = torch.tensor(list(zip(*columns)), dtype=torch.long, device=device).view(len(prompts), len(columns))
        failed = self._gather(failed).bool()  # rewards_per_func is TRL's gathered batch: compare like with like
        self._check_applicable(inputs, rewards_per_func, failed)
        episodes, self._rlvr_episodes = self._rlvr_episodes, None
        written = episodes[1] if episodes is not None else [len(ids) for ids in completion_ids_list]
        lengths = torch.tensor(written, dtype=torch.long, device=device)  # the policy's tokens, not the tools
        indices = torch.tensor([int(x.get("rlvr_index", -1)) for x in inputs], dtype=torch.long, device=device)
        self._rlvr_batch = {
            "rewards_per_func": rewards_per_func,
            "failed": failed,
            "lengths": self._gather(lengths),
            "indices": self._gather(indices),
        }
        if episodes is not None:
            self._rlvr_batch["turns"] = self._gather(torch.tensor(episodes[0], dtype=torch.long, device=device))
        return rewards_per_func

    def _check_applicable(self, inputs, rewards_per_func: torch.Tensor, failed: torch.Tensor) -> None:
        """The first batch of a dataset not checked at construction: a reward that can read nothing in it is
        refused (:func:`~rlvr_plugins.rewards.unread_columns`). Every batch: a reward "not applicable" to more
        than :data:`~rlvr_plugins.rewards.MAX_NOT_APPLICABLE` of the completions is warned about, once."""
        registered = [(r.plugin, r.reward) for r in self.rlvr_rewards]
        if not self._rlvr_columns_checked:
            self._rlvr_columns_checked = True
            problems = unread_columns(registered, *row_columns(inputs), "the first training batch")
            if problems:
                raise PluginError("; ".join(problems))
        names = [getattr(f, "__name__", str(f)) for f in self.reward_funcs]
        shares = not_applicable_shares(rewards_per_func.detach().cpu().double(), failed.cpu())
        for name, share in zip(names, shares, strict=True):
            if share > MAX_NOT_APPLICABLE and name not in self._warned_not_applicable:
                self._warned_not_applicable.add(name)
                logger.warning(
                    "reward %r did not apply (returned None) to %.0f%% of a batch's completions (more than %.0f%%): "
                    "those completions are trained without it; check the columns it reads (warned once)",
                    name,
                    100 * share,
                    100 * MAX_NOT_APPLICABLE,
                )

    def _gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """accelerate's ``gather`` across processes; the tensor itself on one process."""
        return tensor if self.accelerator.num_processes == 1 else gather(tensor)

    def _raise_on_every_rank(self) -> None:
        """Raise a reward error that happened on any process, on every process.

        The reward adapters keep such errors until TRL has gathered the batch's rewards
        (every rank took part in that collective); then the ranks agree on whether one of
        them failed, and all raise the same error, naming the plugin and the rank.
        """
        errors = [
            f"{type(r.pending_error).__name__}: {r.pending_error}"
            for r in self._rlvr_adapters
            if r.pending_error is not None
        ]
        local = next((r.pending_error for r in self._rlvr_adapters if r.pending_error is not None), None)
        if self.accelerator.num_processes == 1:
            if local is not None:
                raise local
            return
        flags = gather(torch.tensor([len(errors)], device=self.accelerator.device))
        if not flags.any():
            return
        messages = gather_object([(self.accelerator.process_index, errors)])
        first_rank, first = next((rank, errs) for rank, errs in messages if errs)
        text = f"reward error on rank {first_rank} (all {self.accelerator.num_processes} ranks stop): {first[0]}"
        if local is not None:
            try:
                error = type(local)(text)
            except Exception:
                error = RewardPluginFailing(text)
            raise error from local
        raise RewardPluginFailing(text)

    def _generate_and_score_completions(self, inputs):
        if self._rlvr_base_weights is None:
            self._rlvr_base_weights = self.reward_weights.clone()
        factors = self.plugin_set.reward_weight_factors(list(self.reward_func_names), self.state.global_step)
        # TRL's own "reward" metric reads self.reward_weights: the scheduled weights of this step
        # (no tensor is built on the step's path when no weight is scheduled)
        self.reward_weights = (
            self._rlvr_base_weights
            if all(f == 1.0 for f in factors)
            else self._rlvr_base_weights
            * torch.tensor(factors, dtype=self._rlvr_base_weights.dtype, device=self._rlvr_base_weights.device)
        )
        mode = "train" if self.model is not None and self.model.training else "eval"
        if self._rlvr_pool is not None and mode == "train":
            return self._pooled_batch(inputs)
        output = super()._generate_and_score_completions(inputs)
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        advantages = self._plugin_advantages(mode, num_generations).advantages
        start = self.accelerator.process_index * len(inputs)
        output["advantages"] = advantages[start : start + len(inputs)].to(output["advantages"].dtype)
        logged: Any = self._logs["advantages"]  # a deque
        if len(logged) >= advantages.numel():
            for _ in range(advantages.numel()):
                logged.pop()
            logged.extend(advantages.tolist())
        return output

    def _plugin_advantages(
        self,
        mode: str,
        num_generations: int,
        batch: Mapping[str, torch.Tensor] | None = None,
        *,
        log: bool = True,
        observe: bool = True,
        round: int = 0,
    ) -> BatchAdvantages:
        """The plugins' advantages of a gathered batch (default: the one TRL just scored). ``log``: its metrics;
        ``observe``: ``rlvr_on_rewards`` sees it, as generation ``round`` (the pool observes each round and logs
        the batch it trains on)."""
        batch = self._rlvr_batch if batch is None else batch
        rewards_per_func = batch["rewards_per_func"]
        names = list(self.reward_func_names)
        result = batch_advantages(
            self.plugin_set,
            rewards_per_func,
            self._rlvr_base_weights if self._rlvr_base_weights is not None else self.reward_weights,
            batch["failed"],
            batch["lengths"],
            num_generations,
            self.state.global_step,
            names,
        )
        metrics = self._metrics[mode]
        valid = result.valid
        if log:
            self._log_batch(metrics, result, batch["failed"])
            for name, value in self.plugin_set.scheduled_weights(self.state.global_step).items():
                metrics[f"weights/{name}"].append(value)
            self._log_lengths(metrics, rewards_per_func, batch["lengths"], names)
            if "turns" in batch:
                for turns, reward in reward_by_turns(batch["turns"].tolist(), result.total.tolist()).items():
                    metrics[f"tools/reward_by_turns/{turns}"].append(reward)
        if mode == "train" and observe:
            self.plugin_set.call(
                "rlvr_on_rewards",
                example_indices=batch["indices"].tolist(),
                rewards=result.total,
                rewards_per_func=rewards_per_func,
                reward_names=names,
                advantages=result.advantages,
                valid=valid,
                num_generations=num_generations,
                step=self.state.global_step,
                log_metric=lambda name, value: metrics[name].append(float(value)),
                round=round,
            )
        return result

    # -- the rollout pool (rlvr_select_groups) ---------------------------------------------
    def _new_pool(self, dataset: Any) -> RolloutPool | None:
        """The rollout pool when an enabled plugin implements ``rlvr_select_groups``; it needs a map-style dataset
        (extra rounds draw prompts by position)."""
        policies = self.plugin_set.implementers("rlvr_select_groups")
        if self._rlvr_segments is not None:
            policies = policies or self.plugin_set.implementers("rlvr_rollout_segments")
        if not policies:
            return None
        if dataset is None or not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise PluginError(
                f"plugin {policies[0]!r} runs the rollout pool, whose extra generation rounds draw prompts by "
                f"position: train_dataset must be a datasets.Dataset (map-style), got {type(dataset).__name__}"
            )
        return RolloutPool(self.num_generations)

    def _pooled_batch(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """One generation batch from the rollout pool: rounds of TRL's generation until the pool policy chooses
        ``needed`` groups, then the chosen rows as TRL's batch for this process, with the plugins' advantages."""
        pool = cast(RolloutPool, self._rlvr_pool)
        g, step = self.num_generations, self.state.global_step
        local = len(inputs)
        needed = local * self.accelerator.num_processes // g
        policies = self.plugin_set.implementers("rlvr_select_groups")
        policy = policies[0] if policies else "rlvr_rollout_segments"
        generated = informative = rounds = skipped = 0
        skipping = bool(self.plugin_set.implementers("rlvr_skip_prompts"))
        announcing = bool(self.plugin_set.implementers("rlvr_pool_started"))
        continuing = self._rlvr_continuations
        while True:
            round_inputs = inputs
            pending = list(continuing.pending) if continuing is not None else []
            started: list[int] | None = None  # the prompts of the groups this round starts
            drawn = self._gathered_indices(inputs)[::g] if rounds == 0 and (announcing or skipping or pending) else []
            if rounds or skipping or pending:
                order = self._pool_order(step, rounds, needed) if rounds or skipping else []
                started, replaced = (drawn if rounds == 0 else order[:needed]), 0
                started = started[: len(started) - len(pending)]  # continued groups take the first places
                if skipping:
                    taken = set(started)
                    started, replaced = self._skip_prompts(started, [i for i in order if i not in taken], step, rounds)
                    skipped += replaced
                if rounds or replaced or pending:
                    round_inputs = self._round_inputs([group.index for group in pending] + started, local)
            if announcing:
                started = drawn if started is None else started
                self.plugin_set.call("rlvr_pool_started", prompts=started, drawn=drawn, step=step, round=rounds)
            if continuing is not None:
                flags = self._segment_round(round_inputs, pending, local, step, rounds)
            else:
                output = super()._generate_and_score_completions(round_inputs)
                result = self._plugin_advantages("train", g, log=False, round=rounds)
                flags = (~result.zero_variance).tolist()
                batch = self._rlvr_batch
                self._rlvr_record.observe(batch["indices"].tolist(), result.total.cpu())
                pool.add(
                    self._gathered_rows(output, local),
                    {key: batch[key].cpu() for key in ("rewards_per_func", "failed", "lengths")},
                    batch["indices"].tolist(),
                    result.total.cpu(),
                    flags,
                    step,
                )
            generated, informative = generated + len(flags), informative + sum(flags)
            if continuing is not None and len(pool.groups) < needed:  # the policy chooses among ready groups
                rounds += 1
                continue
            selection = (
                self.plugin_set.one(
                    "rlvr_select_groups", groups=pool.summaries(step), needed=needed, round=rounds, step=step
                )
                if policies
                else ready_first_selection(pool.summaries(step), needed)
            )
            rounds += 1
            if not isinstance(selection, GroupSelection):
                raise PluginError(
                    f"plugin {policy!r}: rlvr_select_groups returned {type(selection).__name__}, "
                    "expected a rlvr_plugins.rollout_pool.GroupSelection"
                )
            if not selection.more:
                break
        chosen, counts = pool.settle(selection, needed, step, policy)
        counts.rounds, counts.groups_generated, counts.informative_generated = rounds, generated, informative
        counts.skipped_prompts = skipped
        self._record_behaviour_logps(list(pool.groups.values()))
        return self._batch_of(chosen, counts, needed, local)

    # -- partial rollouts (rlvr_rollout_segments) ------------------------------------------
    def _segment_plan(self, args: GRPOConfig) -> SegmentPlan | None:
        """The winner's :class:`~rlvr_plugins.segments.SegmentPlan`, refused at start-up where continuing a
        trajectory from its tokens is not reachable through TRL's ``_generate_single_turn``."""
        answer = self.plugin_set.answer("rlvr_rollout_segments", grpo_args=args)
        if answer is None:
            return None
        name, plan = answer
        if not isinstance(plan, SegmentPlan):
            raise PluginError(
                f"plugin {name!r}: rlvr_rollout_segments returned {type(plan).__name__}, "
                "expected a rlvr_plugins.segments.SegmentPlan or None"
            )
        refused = segment_conflict(
            plan,
            learner=self.plugin_set.learning_sampler(),
            multi_turn=bool(self.tools) or self.environment_factories is not None,
            rollout_func=self.rollout_func is not None,
            paged=self.use_transformers_continuous_batching,
            loss_type=self.loss_type,
            use_vllm=self.use_vllm,
            is_correction=self.vllm_importance_sampling_correction,
            is_mode=self.vllm_importance_sampling_mode,
            is_clip_max=self.vllm_importance_sampling_clip_max,
        )
        if refused:
            raise PluginError(f"plugin {name!r} (partial rollouts) cannot run with {refused}")
        return plan

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """TRL's generation; with partial rollouts, one segment: each unfinished row continues from its prompt and
        tokens so far (``self._rlvr_prefixes``) for at most the plan's budget, a finished row is returned as is.
        Under vLLM the rows' sampling log-probs are joined the same way
        (:func:`~rlvr_plugins.segments.join_segments`)."""
        rows = self._rlvr_prefixes
        if rows is None:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
            )
        plan, limit = cast(SegmentPlan, self._rlvr_segments), cast(int, self.max_completion_length)
        active = [i for i, (_, done, _) in enumerate(rows) if not done]
        written: dict[int, tuple[list[int], list[float | None] | None]] = {}
        if active:
            room = min(plan.tokens, max(limit - len(rows[i][0]) for i in active))  # no row gets less
            # the per-call budget TRL's generator reads: vLLM's max_tokens, or transformers' max_new_tokens
            target = cast(Any, self.vllm_generation if self.use_vllm else self.generation_config)
            name = "max_completion_length" if self.use_vllm else "max_new_tokens"
            budget = getattr(target, name)
            setattr(target, name, max(1, room))
            try:
                context = [list(prompt_ids[i]) + rows[i][0] for i in active]
                new, logps = super()._generate_single_turn(context, images, multimodal_fields, num_generations)
            finally:
                setattr(target, name, budget)
            logps = logps if logps is not None else [None] * len(new)
            written = {i: (list(ids), lp) for i, ids, lp in zip(active, new, logps, strict=True)}
        return join_segments(rows, written, limit)

    def _segment_round(
        self, round_inputs: list[dict[str, Any]], pending: list[PendingGroup], local: int, step: int, round_: int
    ) -> list[bool]:
        """One round of partial rollouts: continue ``pending`` (the round's first groups), start the others, and
        move the groups whose members all finished into the pool. Returns their informative flags."""
        pool, continuing = cast(RolloutPool, self._rlvr_pool), cast(Continuations, self._rlvr_continuations)
        plan, g = cast(SegmentPlan, self._rlvr_segments), self.num_generations
        start = self.accelerator.process_index * local
        members: list[Member] = [
            (group.prefix(i) if group.rows else [], group.done[i], self._sampling_prefix(group, i, step))
            for group in pending
            for i in range(g)
        ]
        members += [([], False, [] if self.use_vllm else None)] * (
            len(round_inputs) * self.accelerator.num_processes - len(members)
        )
        self._rlvr_prefixes = members[start : start + local]
        try:
            output = super()._generate_and_score_completions(round_inputs)
        finally:
            self._rlvr_prefixes = None
        rows, batch = self._gathered_rows(output, local), self._rlvr_batch
        indices = batch["indices"].tolist()
        groups = list(pending) + [
            PendingGroup(indices[k * g], step, [False] * g, {}, [torch.zeros(0, dtype=torch.long)] * g, [], [0] * g)
            for k in range(len(pending), len(indices) // g)
        ]
        continuing.started += g * (len(groups) - len(pending))
        eos = {*self.eos_token_ids, self._tokenizer.pad_token_id}
        behaviour_rows = []
        for k, group in enumerate(groups):
            if not group.rows:
                group.rows = {key: list(values[k * g : k * g + g]) for key, values in rows.items()}
                group.behaviour = [torch.zeros(0) for _ in range(g)]
            for i in (i for i in range(g) if not group.done[i]):
                row, before = k * g + i, group.token_steps[i].numel()
                completion = rows["completion_ids"][row]
                for key in rows:
                    group.rows[key][i] = rows[key][row]
                group.token_steps[i] = extend_steps(group.token_steps[i], completion.numel(), step)
                group.segments[i] += 1
                group.done[i] = finished(
                    completion.tolist(), before, plan.tokens, cast(int, self.max_completion_length), eos
                )
                if (
                    not group.done[i]
                    and plan.repeat_ngram
                    and repeated_ngram_share(" ".join(map(str, completion.tolist())), plan.repeat_ngram)
                    >= plan.repeat_share  # on token n-grams: the ids as words
                ):
                    group.done[i] = True  # cut where it started to loop; finished without EOS
                    continuing.repeat_stopped += 1
                if plan.needs_behaviour and not group.done[i]:
                    if "sampling_per_token_logps" in rows:  # vLLM recorded them as it sampled
                        group.behaviour[i] = rows["sampling_per_token_logps"][row].float()
                    else:
                        behaviour_rows.append((group, i, before))
        self._record_segment_logps(behaviour_rows)
        ready = [k for k, group in enumerate(groups) if all(group.done)]
        continuing.pending = [group for group in groups if not all(group.done)]
        if not ready:
            return []
        picked = torch.tensor([k * g + i for k in ready for i in range(g)])
        subset = {key: value[picked.to(value.device)] for key, value in batch.items()}
        result = self._plugin_advantages("train", g, subset, log=False, round=round_)
        flags = (~result.zero_variance).tolist()
        self._rlvr_record.observe(subset["indices"].tolist(), result.total.cpu())
        finished_groups = [groups[k] for k in ready]
        fields = {key: [row for group in finished_groups for row in group.rows[key]] for key in rows}
        fields[TOKEN_STEP] = [row for group in finished_groups for row in group.token_steps]
        if plan.needs_behaviour:
            fields[BEHAVIOUR] = [row for group in finished_groups for row in group.behaviour]
        pool.add(
            fields,
            {key: subset[key].cpu() for key in ("rewards_per_func", "failed", "lengths")},
            subset["indices"].tolist(),
            result.total.cpu(),
            flags,
            step,
        )
        continuing.completed += g * len(ready)
        continuing.segments_completed += sum(sum(group.segments) for group in finished_groups)
        return flags

    def _sampling_prefix(self, group: PendingGroup, i: int, step: int) -> list[float | None] | None:
        """Under vLLM, the sampling log-probs of member ``i``'s tokens so far
        (:func:`~rlvr_plugins.segments.prefix_logprobs`); ``None`` with transformers (TRL's generator returns none)."""
        if not self.use_vllm:
            return None
        if not group.rows:
            return []
        plan = cast(SegmentPlan, self._rlvr_segments)
        logps = group.rows["sampling_per_token_logps"][i]
        return prefix_logprobs(logps, group.token_steps[i], step, hide_stale=plan.stale is StaleLoss.MASK)

    def _record_segment_logps(self, members: list[tuple[PendingGroup, int, int]]) -> None:
        """The behaviour log-probs of the tokens each unfinished member wrote this round (after its first ``before``
        tokens), from the policy that wrote them; every process runs the same forward pass on the same rows."""
        if not members:
            return
        fields = {key: [group.rows[key][i] for group, i, _ in members] for key in (*PROMPT_FIELDS, *TOKEN_FIELDS[:2])}
        logps = self._policy_logps(self._padded(fields)).cpu()
        for (group, i, before), row in zip(members, logps, strict=True):
            length = group.token_steps[i].numel()
            group.behaviour[i] = torch.cat([group.behaviour[i][:before], row[before:length].float()])

    def _stale_segments(self, output: dict[str, Any], chosen: list[PooledGroup], mine: slice) -> torch.Tensor | None:
        """Apply the plan to the batch's stale tokens (:func:`~rlvr_plugins.segments.stale_tokens`): ``mask`` zeroes
        their loss mask (``tool_mask``); ``truncated-is`` returns the ``(b, T)`` weights of this process's rows (the
        advantages are multiplied by them). Logs the ``pool/*`` partial-rollout metrics of the whole batch."""
        plan, continuing = cast(SegmentPlan, self._rlvr_segments), cast(Continuations, self._rlvr_continuations)
        metrics = self._metrics["train"]
        steps_all = [row for group in chosen for row in group.rows[TOKEN_STEP]]
        stale_all = [stale_tokens(r.view(1, -1), torch.ones(1, r.numel())).view(-1) for r in steps_all]
        stale_count, total = sum(int(x.sum()) for x in stale_all), sum(x.numel() for x in stale_all)
        metrics["pool/partial_carried"].append(float(continuing.carried()))
        metrics["pool/stale_token_frac"].append(stale_count / max(total, 1))
        segments = continuing.segments_completed / max(continuing.completed, 1)
        metrics["pool/segments_per_trajectory"].append(segments)
        if plan.repeat_ngram:
            metrics["pool/repeat_stopped"].append(float(continuing.repeat_stopped))
        width, device = output["completion_ids"].shape[1], output["completion_ids"].device
        stale = torch.stack([torch.nn.functional.pad(x, (0, width - x.numel())) for x in stale_all[mine]]).to(device)
        if not plan.needs_behaviour:
            output["tool_mask"] = output.get("tool_mask", torch.ones_like(output["completion_mask"])) * (~stale).int()
            return None
        if not stale_count:
            return None
        if "importance_sampling_ratio" in output:  # vLLM: TRL's correction weighs them (vllm_is_conflict)
            weights, own = output["importance_sampling_ratio"], False
        else:
            # π_old: the log-probs recorded for a group that waited, else the current policy's (every process
            # decides alike, from the whole batch, so that every process runs the forward pass)
            old = output.get("old_per_token_logps")
            old = self._policy_logps(output) if old is None else old
            behaviour = torch.stack(
                [
                    torch.nn.functional.pad(row.to(device), (0, width - row.numel()))
                    for group in chosen
                    for row in group.rows[BEHAVIOUR]
                ][mine]
            )
            weights, own = stale_weights(old, behaviour, stale, plan.stale, plan.is_cap), True
        picked = weights[stale]
        stats = self.accelerator.gather(
            torch.stack([picked.sum(), picked.new_tensor(picked.numel()), picked.max(), -picked.min()])
            if picked.numel()
            else torch.tensor([0.0, 0.0, float("-inf"), float("-inf")], device=device)
        ).view(-1, 4)
        metrics["pool/is_weight_mean"].append(float(stats[:, 0].sum() / stats[:, 1].sum()))
        metrics["pool/is_weight_max"].append(float(stats[:, 2].max()))
        metrics["pool/is_weight_min"].append(float(-stats[:, 3].max()))
        return weights if own else None

    def _num_prompts(self) -> int:
        return len(cast(Any, self.train_dataset))

    def _positions(self) -> dict[int, int]:
        """``rlvr_index`` → position in the train dataset (the identity without an ``rlvr_index`` column)."""
        if self._rlvr_positions is None:
            dataset: Any = self.train_dataset
            column = dataset["rlvr_index"] if "rlvr_index" in dataset.column_names else range(len(dataset))
            self._rlvr_positions = {int(r): i for i, r in enumerate(column)}
        return self._rlvr_positions

    def _gathered_indices(self, inputs: list[dict[str, Any]]) -> list[int]:
        """The ``rlvr_index`` of every process's rows of this round, in rank order."""
        local = [int(x.get("rlvr_index", -1)) for x in inputs]
        return local if self.accelerator.num_processes == 1 else list(gather_object(local))

    def _pool_order(self, step: int, round: int, needed: int) -> list[int]:
        """``rlvr_pool_prompts`` of the sampler's plugin: the ``rlvr_index`` of the prompts in the order ``round``
        takes them."""
        n = self._num_prompts()
        order = self.plugin_set.one("rlvr_pool_prompts", num_prompts=n, step=step, round=round, seed=self.args.seed)
        positions = [int(p) for p in order] if isinstance(order, (list, tuple)) else []
        if len(positions) < needed or len(set(positions)) < len(positions) or not all(0 <= p < n for p in positions):
            raise PluginContractError(
                f"plugin {self.plugin_set.winner('rlvr_pool_prompts')!r}: rlvr_pool_prompts returned "
                f"{str(order)[:80]}; expected a list of at least {needed} distinct dataset positions in [0, {n})"
            )
        return self._indices_at(positions)

    def _skip_prompts(self, prompts: list[int], candidates: list[int], step: int, round: int) -> tuple[list[int], int]:
        """``rlvr_skip_prompts``: the round's prompts with the skipped ones replaced by ``candidates``, and how
        many were."""
        history = {i: tuple(v) for i, v in self._rlvr_record.streaks.items()}
        skip: set[int] = set()
        for _, named in self.plugin_set.call(
            "rlvr_skip_prompts", prompts=prompts + candidates, history=history, step=step, round=round
        ):
            skip.update(int(i) for i in named or ())
        return replace_prompts(prompts, candidates, skip)

    def _indices_at(self, positions: list[int]) -> list[int]:
        """The ``rlvr_index`` of the train dataset's rows at ``positions``."""
        by_position = {p: i for i, p in self._positions().items()}
        return [by_position[p] for p in positions]

    def _round_inputs(self, prompts: list[int], local: int) -> list[dict[str, Any]]:
        """This process's rows of a round on ``prompts`` (``rlvr_index``), each repeated G times, sliced like TRL."""
        dataset: Any = self.train_dataset
        positions = self._positions()
        rows = [positions[p] for p in prompts for _ in range(self.num_generations)]
        start = self.accelerator.process_index * local
        return [dataset[i] for i in rows[start : start + local]]

    def _gathered_rows(self, output: Mapping[str, Any], local: int) -> dict[str, list[torch.Tensor]]:
        """TRL's batch of this process → every process's rows, per field, padding trimmed, in rank order."""
        start = self.accelerator.process_index * local
        lengths = self._rlvr_batch["lengths"][start : start + local].tolist()
        width = output["completion_ids"].shape[1]
        prompt_lengths = output["prompt_mask"].sum(dim=1).tolist()
        rows: dict[str, list[torch.Tensor]] = {}
        for key, value in output.items():
            if key in ("advantages", "num_items_in_batch"):
                continue
            if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != local:
                raise PluginError(
                    f"the rollout pool ({self.plugin_set.winner('rlvr_select_groups')!r}) cannot carry TRL's batch "
                    f"field {key!r} (not one tensor row per completion; e.g. images); disable the pool plugin"
                )
            value = value.detach().cpu()
            if key in PROMPT_FIELDS:
                rows[key] = trim_rows(value, prompt_lengths, left=True)
            elif key in TOKEN_FIELDS or (value.dim() == 2 and value.shape[1] == width > 1):
                rows[key] = trim_rows(value, lengths)
            else:
                rows[key] = list(value)
        if self.accelerator.num_processes == 1:
            return rows
        parts = gather_object([rows])
        return {key: [row for part in parts for row in part[key]] for key in rows}

    def _record_behaviour_logps(self, groups: list[PooledGroup]) -> None:
        """Give the groups that wait for a later step the behaviour log-probs of the policy that generated them
        (TRL computes ``old_per_token_logps`` only when a generation batch spans optimizer steps)."""
        missing = [group for group in groups if "old_per_token_logps" not in group.rows]
        if not missing:
            return
        rows = [(group, i) for group in missing for i in range(self.num_generations)]
        fields = {key: [group.rows[key][i] for group, i in rows] for key in (*PROMPT_FIELDS, *TOKEN_FIELDS[:2])}
        logps = self._policy_logps(self._padded(fields))
        lengths = [int(group.scores["lengths"][i]) for group, i in rows]
        for (group, _), row in zip(rows, trim_rows(logps.cpu(), lengths), strict=True):
            group.rows.setdefault("old_per_token_logps", []).append(row)

    def _policy_logps(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``(B, C)`` per-token log-probs of the completions under the current policy, without gradients."""
        with torch.no_grad():
            logps = self._get_per_token_logps_and_entropies(
                self.model,
                torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
                torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
                batch["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
            )[0]
        return logps

    def _padded(self, fields: Mapping[str, list[torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Rows → TRL's padded tensors on this device: prompts left-padded, completions right-padded."""
        from trl.trainer.utils import pad

        pad_id = self._tokenizer.pad_token_id
        out = {}
        for key, rows in fields.items():
            if rows[0].dim() == 0:
                out[key] = torch.stack(rows).to(self.accelerator.device)
                continue
            shaped = key in PROMPT_FIELDS or key in TOKEN_FIELDS
            value = pad_id if key in ("prompt_ids", "completion_ids") else 1 if key == "tool_mask" else 0
            out[key] = pad(
                rows,
                padding_value=value,
                padding_side="left" if key in PROMPT_FIELDS else "right",
                pad_to_multiple_of=cast("int | None", self.pad_to_multiple_of) if shaped else None,
            ).to(self.accelerator.device)
        return out

    def _batch_of(self, chosen: list[PooledGroup], counts: StepCounts, needed: int, local: int) -> dict[str, Any]:
        """The chosen groups as this process's slice of TRL's batch, with the advantages of the whole chosen batch."""
        device = self.accelerator.device
        start = self.accelerator.process_index * local
        behaviour = "old_per_token_logps"
        keys = [k for k in chosen[0].rows if k not in (behaviour, TOKEN_STEP, BEHAVIOUR)]
        mine = slice(start, start + local)
        output: dict[str, Any] = self._padded({k: [r for group in chosen for r in group.rows[k]][mine] for k in keys})
        carried = [row for group in chosen for row in group.rows.get(behaviour, [None] * self.num_generations)]
        if any(row is not None for row in carried):  # this step's rows without them: the policy that generated them
            # decided on the whole batch, so that every process runs the forward pass (ZeRO-3 gathers in it)
            current = self._policy_logps(output) if any(row is None for row in carried) else None
            known = carried[mine]
            width = output["completion_ids"].shape[1]
            output[behaviour] = torch.stack(
                [
                    cast(torch.Tensor, current)[i]
                    if row is None
                    else torch.nn.functional.pad(row.to(device), (0, width - row.numel()))
                    for i, row in enumerate(known)
                ]
            )
        weights = self._stale_segments(output, chosen, mine) if self._rlvr_segments is not None else None
        loss_mask = output["completion_mask"] * output.get("tool_mask", 1)
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        scores = {key: torch.cat([group.scores[key] for group in chosen]).to(device) for key in chosen[0].scores}
        result = self._plugin_advantages("train", self.num_generations, scores, observe=False)
        output["advantages"] = result.advantages[mine].to(torch.float32)
        if weights is not None:  # per-token advantages (B, T): TRL's seam, linear in the policy-gradient term
            output["advantages"] = output["advantages"].unsqueeze(1) * weights.to(torch.float32)
        metrics = self._metrics["train"]
        for name, value in counts.metrics(needed).items():
            metrics[name].append(value)
        return output

    def _log_lengths(self, metrics, rewards_per_func, lengths, names) -> None:
        """``completions/mean_length_correct`` and ``_wrong``: lengths split by the correctness reward."""
        if self.correctness_reward not in names:
            return
        column = names.index(self.correctness_reward)
        counts = {True: [0, 0], False: [0, 0]}  # correct / wrong: [completions, summed length]
        for value, length in zip(rewards_per_func[:, column].tolist(), lengths.tolist(), strict=True):
            if value == value:  # scored (not NaN)
                row = counts[value >= self.correct_threshold]
                row[0] += 1
                row[1] += length
        for name, (n, total) in (("correct", counts[True]), ("wrong", counts[False])):
            if n:
                metrics[f"completions/mean_length_{name}"].append(total / n)
        if counts[True][0] + counts[False][0]:
            metrics["rlvr/correct_rate"].append(counts[True][0] / (counts[True][0] + counts[False][0]))

    # -- importance ratios (off-policy drift) -------------------------------------------
    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._rlvr_capture_logps:
            self._rlvr_logps = result[0].detach()
        return result

    def _compute_loss(self, model, inputs):
        self._rlvr_capture_logps, self._rlvr_logps = True, None
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._rlvr_capture_logps = False
        if self._rlvr_logps is not None:
            old = inputs.get("old_per_token_logps")
            mask = inputs["completion_mask"]
            stats = self._gather(
                ratio_statistics(self._rlvr_logps, self._rlvr_logps if old is None else old, mask).unsqueeze(0)
            )  # one collective: (processes, 5)
            if stats.shape[0] > 1:
                stats = torch.cat([stats[:, :3].sum(dim=0), stats[:, 3].max().view(1), stats[:, 4].min().view(1)])
            ratio_sum, abs_log_sum, count, high, low = stats.view(-1).tolist()
            metrics = self._metrics["train" if self.model.training else "eval"]
            metrics["rlvr/ratio/mean"].append(ratio_sum / count if count else 1.0)
            metrics["rlvr/ratio/abs_log_mean"].append(abs_log_sum / count if count else 0.0)
            metrics["rlvr/ratio/max"].append(high if count else 1.0)
            metrics["rlvr/ratio/min"].append(low if count else 1.0)
            self._rlvr_logps = None
        return loss

    def _log_batch(self, metrics, result: BatchAdvantages, failed: torch.Tensor) -> None:
        """The batch's ``rlvr/*`` and ``penalties/*`` metrics, read from the tensors in one transfer."""
        valid = result.valid
        sums = [torch.where(valid, penalty, 0).sum() for _, penalty in result.penalties]
        reward_total, advantage_abs, zero_var, n_valid, *counts = torch.stack(
            [
                torch.nanmean(result.total),
                result.advantages.abs().mean(),
                result.zero_variance.sum(),
                valid.sum(),
                *failed.sum(dim=0),
                *sums,
            ]
        ).tolist()
        metrics["rlvr/reward_total"].append(reward_total if n_valid else 0.0)
        metrics["rlvr/advantage_abs_mean"].append(advantage_abs)
        metrics["rlvr/frac_zero_variance_groups"].append(zero_var / result.zero_variance.numel())
        no_score = 1 - n_valid / valid.numel()
        metrics["rlvr/frac_no_score"].append(no_score)
        for name, count in zip(self.reward_func_names, counts[: failed.shape[1]], strict=True):
            metrics[f"rlvr/failed/{name}"].append(count)
        for (plugin, _), total in zip(result.penalties, counts[failed.shape[1] :], strict=True):
            metrics[f"penalties/{plugin}/mean"].append(total / n_valid if n_valid else 0.0)
        if no_score and not self._warned_no_score:
            undecided = int((~valid & ~failed.any(dim=1)).sum())
            failures = dict(zip(self.reward_func_names, map(int, counts[: failed.shape[1]]), strict=True))
            logger.warning("%s", no_score_warning(int((~valid).sum()), valid.numel(), undecided, failures))
            self._warned_no_score = True

    # -- checkpoints -----------------------------------------------------------------
    #: The text ``create_model_card`` writes as ``<output_dir>/README.md`` instead of TRL's card (``rlvr train``
    #: sets it: TRL's card names the base model "[None]" for a tiny or local policy). None: TRL's card.
    model_card: str | None = None

    def create_model_card(self, *args: Any, **kwargs: Any) -> None:
        if self.model_card is None:
            return super().create_model_card(*args, **kwargs)
        if self.is_world_process_zero():
            Path(str(self.args.output_dir), "README.md").write_text(self.model_card, encoding="utf-8")

    def _save_checkpoint(self, model, trial):
        """TRL's checkpoint, then the plugins' states (the completeness marker), then rotation.

        TRL deletes old checkpoints (``save_total_limit``) at the end of its own save, before
        the marker exists; here the rotation waits until the new checkpoint is complete, so
        a kill at any moment leaves a complete checkpoint. The marker is written once every
        process has written its files (its RNG state, its ZeRO shards). A write error (disk
        full, read-only) removes the half-written folder and stops the run with one message
        naming it, the space needed (:meth:`_checkpoint_bytes` for the first checkpoint) and
        the space free; older checkpoints are untouched.
        """
        run_dir = self._get_output_dir(trial=trial)
        folder = Path(run_dir) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        last = last_complete_checkpoint(run_dir)
        needed = folder_bytes(Path(last)) if last else self._checkpoint_bytes()
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            with writing(folder, Path(run_dir), needed, remove_partial=self.args.should_save):
                super()._save_checkpoint(model, trial)
                self.accelerator.wait_for_everyone()
                state = {name: s for name, s in self.plugin_set.call("rlvr_state_dict") if s is not None}
                if self._rlvr_pool is not None:
                    state[POOL_STATE_KEY] = self._rlvr_pool.state_dict()
                    state[RECORD_STATE_KEY] = self._rlvr_record.state_dict()
                if self._rlvr_continuations is not None:
                    state[PARTIAL_STATE_KEY] = self._rlvr_continuations.state_dict()
                if self.args.should_save:
                    write_atomic(folder / PLUGIN_STATE_FILE, [json.dumps(state)], what="plugin state")
        finally:
            self.args.save_total_limit = limit
        if self.args.should_save:
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )

    def _checkpoint_bytes(self) -> int | None:
        """About what the first checkpoint takes (:func:`checkpoint_bytes_estimate`), from this process's
        parameters and optimizer state: no collective call, no ``state_dict()``. None when it cannot be
        estimated (the disk-full message then leaves the size out), with one warning for the run."""
        try:
            fsdp = getattr(self.accelerator.state, "fsdp_plugin", None) if self.is_fsdp_enabled else None
            shards = self.accelerator.num_processes if getattr(fsdp, "fsdp_version", None) == 1 else 1
            assert self.model is not None
            estimate = checkpoint_bytes_estimate(
                self.model.parameters(), self.optimizer, adapters_only=hasattr(self.model, "peft_config"), shards=shards
            )
            problem = (
                None
                if estimate is not None
                else (
                    f"the optimizer {type(innermost_optimizer(self.optimizer)).__name__} has no state it can read yet "
                    "and is not one whose state per parameter is known"
                )
            )
        except Exception as exc:  # noqa: BLE001 - an estimate never stops a save
            estimate, problem = None, f"{type(exc).__name__}: {exc}"
        if problem and not getattr(self, "_warned_checkpoint_bytes", False):
            logger.warning(
                "the size of a checkpoint cannot be estimated (%s): a disk-full error at the first "
                "checkpoint will not say how much space it needs. This warning is not repeated.",
                problem,
            )
            self._warned_checkpoint_bytes = True
        return estimate

    def train(self, resume_from_checkpoint=None, trial=None, ignore_keys_for_eval=None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = last_complete_checkpoint(str(self.args.output_dir))
            if resume_from_checkpoint is None:
                raise PluginError(f"--resume: no complete checkpoint found in {self.args.output_dir}")
        if resume_from_checkpoint:
            self._load_plugin_state(resume_from_checkpoint)
        try:
            return super().train(
                resume_from_checkpoint=resume_from_checkpoint,
                trial=trial,
                ignore_keys_for_eval=ignore_keys_for_eval,
                **kwargs,
            )
        finally:
            self.engines.close()

    def _load_plugin_state(self, checkpoint: str) -> None:
        path = os.path.join(checkpoint, PLUGIN_STATE_FILE)
        if not os.path.exists(path):
            return
        with open(path, encoding="utf-8") as fh:
            states = json.load(fh)
        if self._rlvr_pool is not None and POOL_STATE_KEY in states:
            self._rlvr_pool = RolloutPool.from_state_dict(states[POOL_STATE_KEY])
            self._rlvr_record = PromptRecord.from_state_dict(states.get(RECORD_STATE_KEY, {}))
        if self._rlvr_continuations is not None and PARTIAL_STATE_KEY in states:
            self._rlvr_continuations = Continuations.from_state_dict(self.num_generations, states[PARTIAL_STATE_KEY])
        elif states.get(PARTIAL_STATE_KEY, {}).get("pending"):
            logger.warning(
                "the checkpoint holds %d unfinished groups of partial rollouts, which this run (without "
                "rlvr_rollout_segments) does not continue: they are dropped",
                len(states[PARTIAL_STATE_KEY]["pending"]),
            )
        for name in self.plugin_set.implementers("rlvr_load_state_dict"):
            if name in states:
                self.plugin_set.call("rlvr_load_state_dict", only=[name], state=states[name])
