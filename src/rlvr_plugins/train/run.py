"""``rlvr train``: config → plugins → model and data → [SFT cold start] → [eval] → GRPO → [eval] → summary.

Everything that can be checked is checked before a model is loaded: the config, the
plugin set, the GRPOConfig the plugins adjust.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..checkpoints import writing
from ..errors import ConfigError
from ..manager import PluginSet, build_plugin_set
from ..outputs import is_main_process, write_atomic
from . import config as cfg
from .modeling import cpu_defaults, has_accelerator, vllm_cpu_problem
from .runfolder import (
    CURVES_FILE,
    FINAL_DIR,
    SUMMARY_FILE,
    RunStart,
    check_more_steps,
    check_still_free,
    clear_run,
    continue_in,
    exclusive,
    mark_policy_complete,
    output_dir,
    plan_run,
    read_json,
    run_header,
    run_readme,
)
from .validate import SFTSection, model_section, run_config

logger = logging.getLogger(__name__)

TRAINER_OWNED = {
    "output_dir": "set output_dir at the top level of the config, not in trainer:",
    "reward_weights": "set each reward's weight in its plugin's options (e.g. plugins: {r1-format: {weight: 0.5}})",
    "multi_objective_aggregation": "advantages come from the estimator plugin (grpo, rloo, batch-std, dr-grpo, ...); "
    "enable normalize-then-sum for TRL's 'normalize_then_sum'",
}

RUN_DEFAULTS = {"report_to": "none", "logging_steps": 1, "save_strategy": "steps", "save_steps": 100}


def grpo_kwargs(config: Mapping[str, Any], plugin_set: PluginSet, import_torch: bool = True) -> dict[str, Any]:
    """The GRPOConfig arguments: run defaults, the user's ``trainer:`` section, then the plugins' adjustments.
    ``import_torch=False``: the CPU defaults are decided without torch (:func:`~.modeling.has_accelerator`)."""
    trainer = dict(run_config(config).trainer)
    kwargs = {**RUN_DEFAULTS, **trainer, "output_dir": str(output_dir(config))}
    kwargs.setdefault("seed", run_config(config).seed)
    cpu_defaults(kwargs, import_torch)
    for name in trainer:
        if name in TRAINER_OWNED:
            raise ConfigError(f"trainer.{name}: {TRAINER_OWNED[name]}")
    adjust_grpo_config(plugin_set, kwargs, trainer)
    _check_scale_rewards(trainer, plugin_set)
    return kwargs


def adjust_grpo_config(plugin_set: PluginSet, kwargs: dict[str, Any], trainer: Mapping[str, Any]) -> None:
    """Let each plugin adjust ``kwargs`` (:meth:`PluginSet.adjust_grpo_config`)."""
    plugin_set.adjust_grpo_config(kwargs, trainer)


def _check_scale_rewards(trainer: Mapping[str, Any], plugin_set: PluginSet) -> None:
    """``trainer.scale_rewards`` is TRL's estimator switch; here the estimator plugin decides."""
    if "scale_rewards" not in trainer:
        return
    estimator = plugin_set.winner("rlvr_compute_advantages")
    value = trainer["scale_rewards"]
    value = "none" if value is False else "group" if value is True else value
    if type(plugin_set.get(estimator)).trl_scale_rewards != value:
        raise ConfigError(
            f"trainer.scale_rewards={trainer['scale_rewards']!r} would have no effect: advantages come from the "
            f"estimator plugin {estimator!r}. Choose the estimator instead: grpo (group std), batch-std (batch std), "
            "mean-baseline, dr-grpo or rloo (no std); remove trainer.scale_rewards"
        )


def build_grpo_config(kwargs: dict[str, Any], with_trl: bool = True):
    """``GRPOConfig(**kwargs)``; TRL's refusals become ``ConfigError``s. ``with_trl=False`` (``rlvr train --check``):
    the same arguments without importing TRL or torch (:func:`~.trl_fields.grpo_config_view`: TRL's defaults and
    its GRPO batch rules; transformers' own checks of ``TrainingArguments`` wait for the run)."""
    try:
        if not with_trl:
            from .trl_fields import grpo_config_view

            return grpo_config_view(kwargs, world_size=int(os.environ.get("WORLD_SIZE", "1")))
        from trl import GRPOConfig

        return GRPOConfig(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"trainer: {exc}") from exc


def engine_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``engine:`` section as :class:`~rlvr_plugins.engine.EngineOptions` fields
    (``Engines(**engine_options(config))``)."""
    return dataclasses.asdict(run_config(config).engine)


@dataclasses.dataclass
class Prepared:
    """What a run needs, checked: the plugins and the GRPOConfig (no model loaded yet)."""

    config: dict[str, Any]
    plugin_set: PluginSet
    grpo_args: Any


def prepare(config: dict[str, Any], plugin_set: PluginSet | None = None, with_trl: bool = True) -> Prepared:
    """Build (or take) the plugin set, the GRPOConfig, and run every check of ``rlvr train --check``.

    ``with_trl=False`` (``--check``): neither TRL nor torch is imported; ``grpo_args`` is then the
    :func:`~.trl_fields.grpo_config_view` of the arguments, which the plugins validate as they would the
    ``GRPOConfig``."""
    plugin_set = plugin_set or build_plugin_set(run_config(config).plugins)
    args = build_grpo_config(grpo_kwargs(config, plugin_set, import_torch=with_trl), with_trl)
    if with_trl:
        plugin_set.adjusted_args = args  # the trainer built with these arguments does not adjust them again
    plugin_set.validate_run(args, run_config(config).engine.deadline_s)
    environments = [(owner, environment.name) for owner, environment in plugin_set.environments()]
    plugin_set.check_segments(args, multi_turn=bool(environments))
    problem = args.use_vllm and vllm_cpu_problem(config, "trainer.use_vllm", has_accelerator(with_trl))
    if problem:
        raise ConfigError(problem)
    problem = environments and tool_loop_problem(environments, *tool_loop_libraries())
    if problem:
        raise ConfigError(problem)
    names = [r.name for _, r in plugin_set.reward_functions()]
    eval_reward = run_config(config).eval.reward
    if eval_reward is not None and eval_reward not in names:
        raise ConfigError(f"eval.reward {eval_reward!r} is not a registered reward; registered: {names}")
    return Prepared(config, plugin_set, args)


def tool_loop_libraries() -> tuple[str, bool]:
    """The installed transformers version and whether jmespath is installed (read without importing them)."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return version, importlib.util.find_spec("jmespath") is not None


def tool_loop_problem(environments: Sequence[tuple[str, str]], transformers: str, has_jmespath: bool) -> str | None:
    """What TRL's tool loop lacks to run the enabled environments (``(plugin, environment)`` pairs), or None:
    ``environment_factory`` needs transformers >= 5.2.0, and below 5.13.0 its tool-call parser needs jmespath.

    >>> tool_loop_problem([("calculator", "calculator")], "5.1.0", True).split(" (")[0]
    "plugin 'calculator' enables environment 'calculator', but TRL's tool loop needs transformers >= 5.2.0"
    >>> tool_loop_problem([("calculator", "calculator")], "5.24.0", False) is None
    True
    """
    from packaging.version import Version

    plugin, name = environments[0]
    what = f"plugin {plugin!r} enables environment {name!r}, but TRL's tool loop needs"
    if Version(transformers) < Version("5.2.0"):
        return f"{what} transformers >= 5.2.0 (installed: {transformers}); pip install -U 'transformers>=5.2'"
    if Version(transformers) < Version("5.13.0") and not has_jmespath:
        return f"{what} jmespath with transformers {transformers} (< 5.13.0); pip install jmespath"
    return None


def check_tool_template(
    tokenizer: Any, config: Mapping[str, Any], plugin_set: PluginSet, chat_template_kwargs: Any = None
) -> list[str]:
    """Refuse, before the model loads, a tokenizer whose chat template cannot serve TRL's tool loop when an
    environment is enabled: one that cannot render a tool call (TRL's ``supports_tool_calling``; TRL would
    refuse it when the trainer is built), or one that breaks the token prefix across turns for the run's
    ``chat_template_kwargs`` (:func:`rlvr_plugins.turns.check_turns`). Returns the latter's warnings."""
    environments = plugin_set.environments()
    if not environments:
        return []
    from trl.chat_template_utils import supports_tool_calling

    from ..turns import check_turns

    model = model_section(config)
    name = model.tokenizer or ("char" if model.tiny is not None else model.name_or_path)
    owner, environment = environments[0]
    if not supports_tool_calling(tokenizer):
        raise ConfigError(
            f"model.tokenizer: the chat template of {name!r} cannot render tool calls, but plugin {owner!r} enables "
            f"environment {environment.name!r}; use a tokenizer whose chat template renders tool calls and tool "
            "results (a Qwen2.5 or Qwen3 tokenizer, for example)"
        )
    kwargs = chat_template_kwargs if isinstance(chat_template_kwargs, Mapping) else None
    try:
        return check_turns(tokenizer, dict(kwargs or {}))
    except ConfigError as exc:
        raise ConfigError(
            f"model.tokenizer: the chat template of {name!r} breaks multi-turn tool use, which plugin {owner!r} "
            f"enables (environment {environment.name!r}): {'; '.join(exc.problems)}"
        ) from None


def check_chat_prompts(rows: Sequence[Mapping[str, Any]], plugin_set: PluginSet) -> None:
    """Refuse rendered prompts that are plain text when an environment is enabled: TRL's tool loop reads tool
    calls from chat messages only."""
    environments = plugin_set.environments()
    text = next((i for i, row in enumerate(rows) if isinstance(row.get("prompt"), str)), None)
    if environments and text is not None:
        owner, environment = environments[0]
        raise ConfigError(
            f"plugin {owner!r} enables environment {environment.name!r}, but train row {text} is rendered as plain "
            "text; TRL's tool loop needs chat messages: give the prompts as lists of messages "
            "([{role: user, content: ...}]) or enable a template plugin that renders them so"
        )


def check_agentic_tokenizer(rows: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> None:
    """Refuse ``model.tokenizer: char-agentic`` with rendered prompts that are plain text: its tool markers and
    tool-call chat template serve chat prompts only (``data.*.task: agentic``)."""
    text = next((i for i, row in enumerate(rows) if isinstance(row.get("prompt"), str)), None)
    if model_section(config).tokenizer == "char-agentic" and text is not None:
        raise ConfigError(
            f"model.tokenizer 'char-agentic' renders chat prompts with tool calls, but train row {text} is rendered "
            "as plain text; use it with chat prompts (data task: agentic), or tokenizer: char for plain-text prompts"
        )


def check_prepared_start(start: RunStart | None, prepared: Prepared) -> None:
    """A ``--resume`` that raises ``trainer.max_steps``, checked again on the ``GRPOConfig`` the plugins adjusted
    (:func:`~rlvr_plugins.train.runfolder.plan_run` saw only the config; a plugin may set the schedule)."""
    if start is not None and start.checkpoint is not None and start.raised_from:
        args = prepared.grpo_args
        check_more_steps(start.checkpoint, start.raised_from, args.max_steps, args.lr_scheduler_type, args.warmup_steps)


def check_turn_template(prepared: Prepared, train_rows: list[dict[str, Any]] | None) -> list[str]:
    """``--check`` with an environment or the ``char-agentic`` tokenizer: load the run's tokenizer (only it), run
    :func:`check_tool_template` on it and check the rendered ``train_rows`` (when loaded) as a run does
    (:func:`check_chat_prompts`, :func:`check_agentic_tokenizer`); returns the warnings."""
    config = prepared.config
    if not prepared.plugin_set.environments() and model_section(config).tokenizer != "char-agentic":
        return []
    from . import data, modeling

    tokenizer = modeling.load_tokenizer(config)
    warnings = check_tool_template(tokenizer, config, prepared.plugin_set, prepared.grpo_args.chat_template_kwargs)
    if train_rows:
        rendered = data.render(train_rows, prepared.plugin_set, tokenizer, int(prepared.grpo_args.seed))
        check_chat_prompts(rendered, prepared.plugin_set)
        check_agentic_tokenizer(rendered, config)
    return warnings


def validate_scoring(config: Mapping[str, Any], plugin_set: PluginSet | None = None) -> PluginSet:
    """The validation of ``rlvr train --check`` (plugins, GRPOConfig, every plugin's
    ``rlvr_validate_run``) for a command that scores completions, so that a reward whose time
    budget does not fit the engine's deadline is refused here as it is in training."""
    return prepare(dict(config), plugin_set).plugin_set


def probe_reward_examples(prepared: Prepared) -> None:
    """``--check``: score each reward's own example once (:func:`rlvr_plugins.rewards.probe_rewards`), with one
    worker process: a few items need no more, whatever ``engine.workers`` says."""
    from ..rewards import Engines, probe_rewards

    engines = Engines(**{**engine_options(prepared.config), "num_workers": 1})
    try:
        probe_rewards(prepared.plugin_set.reward_functions(), engines)
    finally:
        engines.close()


def check_data(prepared: Prepared) -> list[dict[str, Any]] | None:
    """``--check``: load every split whose data is on this machine (a ``jsonl`` file that exists, or
    ``synthetic``; a hub dataset is not downloaded) and check it as a run does (:func:`data.check_rows`):
    a reward that applies to no row of a split is refused here, not after the run. Returns the train
    rows, or None when they are not on this machine."""
    from . import data
    from .sections import JsonlSplit, SyntheticSplit

    sections = run_config(prepared.config).data
    train_rows = None
    for split in ("train", "eval"):
        spec = getattr(sections, split, None) if sections is not None else None
        local = isinstance(spec, SyntheticSplit) or (
            isinstance(spec, JsonlSplit) and Path(cfg.resolve_path(prepared.config, spec.path)).is_file()
        )
        if local:
            rows = data.load_rows(prepared.config, split, prepared.plugin_set)
            train_rows = rows if split == "train" else train_rows
    return train_rows


def write_run_header(out: Path, prepared: Prepared) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plugins = run_header(prepared.plugin_set)
    (out / "plugins.json").write_text(json.dumps(plugins, indent=2), encoding="utf-8")  # first: it marks a run folder
    (out / "config.yaml").write_text(cfg.run_config_text(prepared.config), encoding="utf-8")


def train(
    config: dict[str, Any], resume: str | bool | None = None, overwrite: bool = False, start: RunStart | None = None
) -> dict[str, Any]:
    """Run the whole pipeline; return the summary (also written to ``summary.json``).

    ``resume`` (True for the newest complete checkpoint, or a checkpoint folder) skips the
    SFT cold start and the first evaluation, and restarts GRPO from the checkpoint with the
    policy saved in ``policy-init`` as its reference; a checkpoint already at ``max_steps``
    trains nothing more: only ``final/``, the eval after and the summary are made, where
    missing. ``overwrite`` removes an earlier run from ``output_dir`` first (after every
    check passed). ``start``: the :func:`~rlvr_plugins.train.runfolder.plan_run` already made
    for these arguments.
    """
    start = start or plan_run(config, resume, overwrite)
    if start.finished and _complete(start.out):
        if (start.out / CURVES_FILE).is_file() or not _can_draw():
            print(
                f"the run in {start.out} is already complete (step {start.step}, {SUMMARY_FILE} written): "
                "nothing to do",
                flush=True,
            )
        else:
            print(
                f"the run in {start.out} is complete (step {start.step}, {SUMMARY_FILE} written) but has no "
                f"{CURVES_FILE} (its writing failed): drawing it",
                flush=True,
            )
            _write_curves(start.out)
        return read_json(start.out / SUMMARY_FILE) or {}
    prepared = prepare(config)  # every config and launch check before the folder is made
    check_prepared_start(start, prepared)
    with exclusive(start.out):
        check_still_free(start)  # again, now that no other run can write there
        return _train(config, start, prepared)


def _train(config: dict[str, Any], start: RunStart, prepared: Prepared) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import set_seed

    from ..rewards import Engines, probe_rewards
    from ..trainer import RLVRTrainer
    from . import data, modeling
    from .evaluation import evaluate, evaluate_episodes, metric_row
    from .integrity import IntegrityWatch
    from .runfolder import start_from_policy, truncate_metrics
    from .runlog import (
        GracefulStop,
        IntegrityAlarm,
        MetricsWriter,
        PeriodicEval,
        SeedAtTrainBegin,
        compact_console,
    )

    started = time.perf_counter()
    out = start.out
    checkpoint = str(start.checkpoint) if start.checkpoint else None
    dist = _distributed_state()
    if is_main_process():
        if start.overwrite and (removed := clear_run(out)):
            print(f"--overwrite: removed the earlier run from {out} ({len(removed)} entries)", flush=True)
        with writing(out, out, remove_partial=False):
            if checkpoint:
                continue_in(out, start)
                truncate_metrics(out / "metrics.jsonl", start.step)
            elif start.from_policy:
                start_from_policy(out)
            write_run_header(out, prepared)
    dist.wait_for_everyone()
    seed = int(prepared.grpo_args.seed)
    set_seed(seed)
    tokenizer = modeling.load_tokenizer(config)
    check_tool_template(tokenizer, config, prepared.plugin_set, prepared.grpo_args.chat_template_kwargs)
    checking = prepared.plugin_set if is_main_process() else None
    raw_train = data.load_rows(config, "train", checking)
    assert raw_train is not None, "load_config requires data.train for rlvr train"
    train_rows = data.render(raw_train, prepared.plugin_set, tokenizer, seed)
    check_chat_prompts(train_rows, prepared.plugin_set)
    check_agentic_tokenizer(train_rows, config)
    eval_rows = data.load_rows(config, "eval", checking)
    eval_rows = data.render(eval_rows, prepared.plugin_set, tokenizer, seed) if eval_rows else None
    sections = run_config(config)
    sft_section = sections.sft
    if sft_section:
        from .sft import sft_examples

        sft_rows, train_rows = _split_for_sft(train_rows, sft_section)
        sft_rows, _ = sft_examples(
            prepared.plugin_set, raw_train[: len(sft_rows)], sft_section.completion_column, seed, tokenizer, sft_rows
        )
    engines = Engines(**engine_options(config))
    rewards = prepared.plugin_set.reward_functions()
    probe_rewards(rewards, engines)
    summary: dict[str, Any] = {"output_dir": str(out), "plugins": prepared.plugin_set.names, "stages": {}}
    max_new = int(prepared.grpo_args.max_completion_length)
    eval_section = sections.eval.in_train(max_new)

    metrics = MetricsWriter(out / "metrics.jsonl")
    # with an environment, held-out episodes run through the trainer's tool loop (once it exists)
    episodes = bool(prepared.plugin_set.environments())

    def measure(tag: str, model, engine=None):
        if not eval_rows:
            return None
        t = time.perf_counter()
        if episodes:
            result = evaluate_episodes(trainer, sections.eval.reward)
        else:
            with modeling.full_weights(model, engine):
                result = evaluate(model, tokenizer, eval_rows, rewards, engines, eval_section)
        result["seconds"] = round(time.perf_counter() - t, 1)
        if is_main_process():
            tools = f"; tool calls {result['tool_calls']:.2f} per episode" if "tool_calls" in result else ""
            print(
                f"[eval {tag}] accuracy {100 * result['accuracy']:.1f}% on {result['n']} held-out problems "
                f"({result['reward']}); rewards {_fmt(result['rewards'])}{tools}",
                flush=True,
            )
        return result

    def run_eval(tag: str, model, step: int, engine=None):
        result = measure(tag, model, engine)
        if result is not None:
            summary[f"eval_{tag}"] = result
            if is_main_process():
                metrics.write(step, metric_row(result))

    policy_dir = out / "policy-init"
    if checkpoint:
        summary["resumed_from"] = checkpoint
        summary.update(_carried_over(start.run_folder))
    if checkpoint and policy_dir.is_dir():
        policy = str(policy_dir)
    elif start.from_policy:
        if is_main_process():
            print(
                f"--resume: no complete GRPO checkpoint in {out}; GRPO starts from the complete {policy_dir} "
                "(the SFT cold start is not redone)",
                flush=True,
            )
        policy = str(policy_dir)
        if sft_section:
            summary["sft_examples"] = len(sft_rows)
        if not episodes:
            run_eval("before", modeling.load_saved_policy(config, policy_dir), 0)
    else:
        model = modeling.load_model(config, tokenizer, seed)
        if sft_section:
            from .sft import end_stage, last_logged_loss, run_sft, save_trained

            t = time.perf_counter()
            sft_trainer = run_sft(model, tokenizer, sft_rows, sft_section, out / "sft", seed, max_new)
            summary["stages"]["sft_seconds"] = round(time.perf_counter() - t, 1)
            summary["sft_examples"] = len(sft_rows)
            summary["sft_final_loss"] = last_logged_loss(sft_trainer.state.log_history)
            with writing(policy_dir, out):
                save_trained(sft_trainer, policy_dir)
                mark_policy_complete(policy_dir)
            if not episodes:
                run_eval("before", sft_trainer.model, 0, sft_trainer.model_wrapped)
            end_stage(sft_trainer, prepared.grpo_args)
            del sft_trainer, model
            policy = str(policy_dir)
        else:
            if not episodes:
                run_eval("before", model, 0)
            if model_section(config).tiny is not None:
                if is_main_process():
                    with writing(policy_dir, out):
                        _policy_path(model, tokenizer, policy_dir)
                        mark_policy_complete(policy_dir)
                dist.wait_for_everyone()
                policy = str(policy_dir)
            else:
                policy = model
    stop = GracefulStop()
    callbacks = [metrics, stop, SeedAtTrainBegin()]
    every = sections.eval.every_steps
    if every and eval_rows:  # the trainer's wrapped model: under ZeRO-3 its weights are gathered for generation
        watch = IntegrityWatch(sections.eval.integrity_window)

        def log_eval(step: int, row: dict[str, float]) -> None:
            metrics.write(step, row)
            watch.evaluation(step, row["eval/accuracy"])

        callbacks += [
            PeriodicEval(
                every, lambda step, _: measure(f"step {step}", trainer.model, trainer.model_wrapped), log_eval
            ),
            IntegrityAlarm(watch, metrics.write),
        ]
    t = time.perf_counter()
    trainer = RLVRTrainer(
        plugin_set=prepared.plugin_set,
        engines=engines,
        model=policy,
        args=prepared.grpo_args,
        train_dataset=Dataset.from_list(train_rows),
        eval_dataset=Dataset.from_list(eval_rows) if episodes and eval_rows else None,
        processing_class=tokenizer,
        peft_config=modeling.lora_config(config),
        callbacks=callbacks,
        correctness_reward=sections.eval.reward,
        correct_threshold=sections.eval.threshold,
    )
    trainer.model_card = run_readme(config, prepared.plugin_set.names)
    compact_console(trainer, show_bar=not prepared.grpo_args.disable_tqdm)
    if episodes and not checkpoint:
        run_eval("before", trainer.model, 0)
    if start.finished:
        trainer._load_from_checkpoint(str(start.checkpoint))
        summary["grpo_steps"] = start.step
        print(f"{checkpoint} is at the last step ({start.step}): no training left; finishing the run", flush=True)
    else:
        with stop.installed():
            trainer.train(resume_from_checkpoint=checkpoint)
        summary["stages"]["grpo_seconds"] = round(time.perf_counter() - t, 1)
        summary["grpo_steps"] = trainer.state.global_step
    if stop.signal_name:
        summary["stopped_by"] = stop.signal_name
        if is_main_process():
            print(
                f"stopped by {stop.signal_name} at step {trainer.state.global_step}; checkpoint written. "
                f"Continue with: rlvr train CONFIG --resume",
                flush=True,
            )
    else:
        if not (start.finished and (out / FINAL_DIR).is_dir()):
            save_final(trainer, out, dist)
        run_eval("after", trainer.model, summary["grpo_steps"], trainer.model_wrapped)
    if "eval_before" in summary and "eval_after" in summary:
        summary["accuracy_gain_points"] = round(
            100 * (summary["eval_after"]["accuracy"] - summary["eval_before"]["accuracy"]), 1
        )
    summary["reward_engine"] = engines.stats()
    summary["reward_failures"] = engines.failures()
    engines.close()
    summary["seconds"] = round(time.perf_counter() - started, 1)
    summary["threads"] = torch.get_num_threads()
    if is_main_process():
        with writing(out / SUMMARY_FILE, out, remove_partial=False):
            write_atomic(out / SUMMARY_FILE, [json.dumps(summary, indent=2, default=str)], what="summary")
        _print_summary(summary)
        if (out / "metrics.jsonl").is_file():
            from .runlog import read_metrics

            hint = no_signal_line(read_metrics(out / "metrics.jsonl"))
            if hint:
                print(hint, flush=True)
        _write_curves(out)
    return summary


def _complete(out: Path) -> bool:
    """The run in ``out`` ended normally: ``final/`` and a ``summary.json`` without ``stopped_by``."""
    path = out / SUMMARY_FILE
    if not (out / FINAL_DIR).is_dir() or not path.is_file():
        return False
    try:
        return "stopped_by" not in json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return False


def _carried_over(run_folder: Path) -> dict[str, Any]:
    """What a resumed run keeps from the summary of the run it continues (written when that run was stopped)."""
    path = run_folder / SUMMARY_FILE
    try:
        earlier = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        return {}
    return {k: earlier[k] for k in ("eval_before", "sft_examples") if k in earlier}


def save_final(trainer, out: Path, dist) -> None:
    """``final/``, atomically: saved as ``final.partial/`` then renamed, so a ``final/`` is always whole."""
    partial, final = out / (FINAL_DIR + ".partial"), out / FINAL_DIR
    if is_main_process():
        shutil.rmtree(partial, ignore_errors=True)
    with writing(partial, out):
        trainer.save_model(str(partial))
    if is_main_process():
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
    dist.wait_for_everyone()


def _can_draw() -> bool:
    """matplotlib is installed (``rlvr-plugins[plots]``): a run draws its ``curves.png``."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _write_curves(out: Path) -> None:
    """Draw ``curves.png``, the run's last file; a full disk there is one line saying the run itself is complete
    and that ``--resume`` draws it."""
    from ..outputs import OutputError
    from .curves import draw_curves

    try:
        path = draw_curves(out)
    except OutputError as exc:
        raise OutputError(
            f"{exc}; the run itself is complete ({FINAL_DIR}/, {SUMMARY_FILE}): free space and run rlvr train "
            "CONFIG --resume to draw it"
        ) from exc
    print(
        f"learning curves: {path}"
        if path
        else "learning curves not drawn (matplotlib is not installed: pip install rlvr-plugins[plots])",
        flush=True,
    )


def _policy_path(model, tokenizer, folder: Path) -> str:
    """Save a policy built or fine-tuned in this run, so TRL loads it (and its reference copy for ``beta > 0``)
    by path."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _distributed_state():
    """accelerate's process state: under ``accelerate launch`` / ``torchrun`` only the main process writes files."""
    from accelerate import PartialState

    return PartialState()


def _split_for_sft(rows: list[dict[str, Any]], section: SFTSection):
    """The first ``sft.examples`` rows go to SFT, the rest to RL (disjoint); half of them if not given."""
    n = len(rows) // 2 if section.examples is None else section.examples
    if not 0 < n < len(rows):
        raise ConfigError(f"sft.examples={n} must leave rows for RL: the train split has {len(rows)} rows")
    return rows[:n], [{**r, "rlvr_index": i} for i, r in enumerate(rows[n:])]


def _fmt(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in values.items())


def _print_summary(summary: Mapping[str, Any]) -> None:
    print("=" * 60)
    print(f"run folder: {summary['output_dir']}")
    for tag in ("before", "after"):
        if f"eval_{tag}" in summary:
            e = summary[f"eval_{tag}"]
            label = eval_label(tag, "sft_examples" in summary)
            tools = f"  tool calls {e['tool_calls']:.2f} per episode" if "tool_calls" in e else ""
            print(f"held-out accuracy {label:>24}: {100 * e['accuracy']:5.1f}%  (n={e['n']}){tools}")
    if "accuracy_gain_points" in summary:
        print(f"gain from GRPO: {summary['accuracy_gain_points']:+.1f} points")
    print(f"time: {summary['seconds']:.0f}s  stages: {summary['stages']}")
    print(failure_line(summary.get("reward_failures") or {}))
    print("=" * 60, flush=True)


def eval_label(tag: str, with_sft: bool) -> str:
    """What the summary calls the evaluation ``tag`` (``before``/``after`` GRPO): "after SFT" only for a run
    that had an SFT cold start.

    >>> eval_label("before", True), eval_label("before", False), eval_label("after", False)
    ('after SFT (before GRPO)', 'before GRPO', 'after GRPO')
    """
    if tag == "after":
        return "after GRPO"
    return "after SFT (before GRPO)" if with_sft else "before GRPO"


def no_signal_line(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """A hint when no GRPO step had a learning signal: in every logged step each group's completions scored
    alike (TRL's ``frac_reward_zero_std`` is 1), typically a policy that never scores. ``None`` otherwise.

    >>> no_signal_line([{"step": 0}, {"step": 1, "frac_reward_zero_std": 1.0, "reward": 0.0},
    ...                 {"step": 2, "frac_reward_zero_std": 1.0, "reward": 0.0}])[:78]
    'no learning signal: in all 2 GRPO steps each group scored alike (best step rew'
    >>> no_signal_line([{"step": 1, "frac_reward_zero_std": 1.0}, {"step": 2, "frac_reward_zero_std": 0.5}]) is None
    True
    """
    steps = [r for r in rows if r.get("frac_reward_zero_std") is not None]
    if not steps or any(r["frac_reward_zero_std"] < 1.0 for r in steps):
        return None
    best = max((r["reward"] for r in steps if r.get("reward") is not None), default=float("nan"))
    return (
        f"no learning signal: in all {len(steps)} GRPO steps each group scored alike (best step reward {best:.3f}), "
        "so nothing was learned and the curves stay flat; start from a policy that scores some answers "
        "(an sft: stage, or model.name_or_path), see docs/recipes.md"
    )


def failure_line(failures: Mapping[str, Mapping[str, int]]) -> str:
    """The summary's line on rewards that raised, timed out or returned no usable value.

    >>> failure_line({"r1-accuracy": {"items": 512, "failed": 3}, "r1-format": {"items": 512, "failed": 0}})
    'reward failures (no score, masked): r1-accuracy 3 of 512 items, r1-format 0 of 512 items'
    """
    if not failures:
        return "reward failures: none scored"
    return "reward failures (no score, masked): " + ", ".join(
        f"{name} {c['failed']} of {c['items']} items" for name, c in failures.items()
    )


def configure_threads() -> None:
    import torch

    n = int(os.environ.get("RLVR_THREADS", "0")) or min(torch.get_num_threads(), os.cpu_count() or 1)
    torch.set_num_threads(n)
