"""The ``rlvr`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import Interrupted, RLVRError, bounded
from ..train.validate import run_config, where_of
from .common import quiet_libraries


def main(argv: Sequence[str] | None = None) -> int:
    """Every command checks its config and files first, before torch, TRL or datasets are
    imported (``quiet_libraries`` is the first heavy step), so bad input fails in well under 2 s."""
    try:
        parser = build_parser(argv)
    except RLVRError as exc:
        print(f"rlvr: error: {bounded(str(exc))}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if getattr(args, "disable", None):
        args.overrides = [*args.overrides, *(f"plugins.{name}=" for name in args.disable)]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose:
        logging.getLogger("rlvr_plugins.engine.traceback").setLevel(logging.DEBUG)  # a failing reward's traceback
    try:
        return args.func(args)
    except Interrupted as exc:
        print(f"rlvr: {exc}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    except RLVRError as exc:
        print(f"rlvr: error: {bounded(str(exc))}", file=sys.stderr)
        if exc.__cause__ is not None and args.verbose:
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        return 2


def build_parser(argv: Sequence[str] | None = ()) -> argparse.ArgumentParser:
    """The parser of every built-in command, plus the commands of installed plugins
    (``rlvr_register_commands``) unless ``argv`` names a built-in command (so a built-in
    command imports no plugin it does not use)."""
    parser = argparse.ArgumentParser(prog="rlvr", description="RL with verifiable rewards, as plugins on TRL.")
    parser.add_argument("--version", action="version", version=f"rlvr-plugins {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print chained tracebacks of errors, and the traceback of each item a reward failed on",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text, add_arguments, run, module in builtin_commands():
        described = (
            {}
            if module is None
            else {
                "description": module.__doc__,
                "epilog": getattr(module, "EXAMPLES", None),
                "formatter_class": argparse.RawDescriptionHelpFormatter,
            }
        )
        p = sub.add_parser(name, help=text, **described)
        add_arguments(p)
        p.set_defaults(func=run)
    names = set(sub.choices)
    command = next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)
    if command not in names:
        from ..manager import register_plugin_commands

        register_plugin_commands(sub)
    return parser


def builtin_commands():
    """``(name, help, add_arguments(parser), run(args) -> exit code, module documenting it or None)`` of
    every built-in command: one table, one registration loop."""
    from . import audit_cmd, compare_cmd, distill_cmd, eval_cmd, filter_cmd, sft_cmd

    return (
        ("plugins", "list installed plugins, their versions and hooks", _plugins_arguments, cmd_plugins, None),
        ("train", "train with a YAML config", _train_arguments, cmd_train, None),
        ("score", "score saved completions with the enabled plugins (no training)", _score_arguments, _cmd_score, None),
        (
            "eval",
            "evaluate a model: zero-shot, few-shot or chain-of-thought prompting; accuracy, pass@k, maj@k, "
            "format rate (writes eval.json and eval.md)",
            _eval_arguments,
            cmd_eval,
            eval_cmd,
        ),
        (
            "sft",
            "SFT cold start alone (TRL SFTTrainer); the model is saved to <output_dir>/model",
            _config_arguments,
            cmd_sft,
            sft_cmd,
        ),
        (
            "filter",
            "difficulty filtering: keep prompts whose pass rate is in a band (filtered.jsonl)",
            _config_arguments,
            cmd_filter,
            filter_cmd,
        ),
        (
            "distill",
            "rejection sampling: keep a teacher's correct, well-formed traces as an SFT set",
            _config_arguments,
            cmd_distill,
            distill_cmd,
        ),
        (
            "audit",
            "estimator lab: bias and variance of each advantage estimator against the exact policy gradient "
            "(table and PNG plots)",
            audit_cmd.add_arguments,
            audit_cmd.run,
            audit_cmd,
        ),
        (
            "compare",
            "compare run folders: PNG plots per metric and a markdown table",
            compare_cmd.add_arguments,
            compare_cmd.run,
            compare_cmd,
        ),
    )


def _plugins_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--config", help="also say which plugins this config enables (validates it)")


def _train_arguments(p) -> None:
    p.add_argument("config")
    add_set(p, "trainer.learning_rate=1e-6")
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="CHECKPOINT",
        help="resume from the last complete checkpoint of output_dir, or from CHECKPOINT (same config)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="output_dir holds an earlier run: remove it (only the run's own entries) and start over",
    )
    p.add_argument("--check", action="store_true", help="validate the config and plugins, then stop")
    add_disable(p)


def _score_arguments(p) -> None:
    p.add_argument("config", **RUN_DIR_ARGUMENT)
    p.add_argument("completions", help="JSONL rows: prompt, completion, answer, optional group")
    p.add_argument("--output", help="write one scored JSONL row per input row")
    add_set(p)
    add_disable(p)
    p.add_argument(
        "--step",
        type=int,
        default=None,
        help="training step seen by step-dependent plugins (default: past any warm-up)",
    )


def _config_arguments(p, run_dir: bool = False) -> None:
    p.add_argument("config", **RUN_DIR_ARGUMENT if run_dir else {})
    add_set(p, "eval.n=8")
    add_disable(p)


def _eval_arguments(p) -> None:
    _config_arguments(p, run_dir=True)


RUN_DIR_ARGUMENT = {
    "metavar": "CONFIG|RUN_DIR",
    "help": "a config file, or a run folder: its final/ model with the run's own config.yaml",
}


def add_set(parser, example: str | None = None) -> None:
    """``--set KEY=VALUE`` (repeatable), the config override every command that reads a config takes."""
    help_text = f"override a config value, e.g. --set {example} (repeatable)" if example else None
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def add_disable(parser) -> None:
    parser.add_argument(
        "--disable",
        action="append",
        default=[],
        metavar="PLUGIN",
        help="turn off a plugin the config enables, e.g. --disable kimi-length (repeatable; the same "
        "as --set plugins.PLUGIN=null)",
    )


def cmd_plugins(args) -> int:
    from ..manager import build_plugin_set, list_plugins

    enabled = None
    config = None
    if args.config:
        from ..train.config import load_config

        config = load_config(args.config)
    quiet_libraries()
    if config is not None:
        enabled = set(build_plugin_set(run_config(config).plugins).names)
    rows = list_plugins(enabled)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        mark = "" if enabled is None else ("[enabled] " if row.get("enabled") else "          ")
        print(f"{mark}{row['name']}  ({row['distribution']} {row['version']})")
        if "error" in row:
            print(f"    ERROR: {row['error']}")
            continue
        if "warning" in row:
            print(f"    WARNING: {row['warning']}")
        print(f"    hooks: {', '.join(row['hooks'])}")
        if row["options"]:
            print(f"    options: {'; '.join(row['options'])}")
    return 0


def cmd_train(args) -> int:
    from ..manager import check_plugins_config
    from ..train.config import load_config, missing_data_files
    from ..train.runfolder import check_no_user_files, check_output_dir, output_dir, plan_run, run_entries

    config = load_config(args.config, args.overrides, need_files=not args.check)
    out = output_dir(config)
    if args.check and not (args.resume or args.overwrite):
        check_output_dir(out)  # a used folder is a note for --check, not an error
        check_no_user_files(out)  # no flag gets past this one
        start = None
    else:
        start = plan_run(config, args.resume, args.overwrite)
    check_plugins_config(run_config(config).plugins, where=where_of(config))
    quiet_libraries()
    from ..train.run import (
        check_data,
        check_prepared_start,
        check_turn_template,
        configure_threads,
        prepare,
        probe_reward_examples,
        train,
    )

    if args.check:
        prepared = prepare(config, with_trl=False)
        check_prepared_start(start, prepared)
        warnings = check_turn_template(prepared, check_data(prepared))
        probe_reward_examples(prepared)
        print(f"config OK; plugins: {', '.join(prepared.plugin_set.names)}")
        for warning in warnings:
            print(f"warning: the chat template: {warning}")
        if start is None and run_entries(out):
            print(f"note: output_dir {out} holds a run: training it needs --resume or --overwrite")
        for problem in missing_data_files(config):
            print(f"note: {problem}; the run needs it when it starts")
        return 0
    configure_threads()
    train(config, start=start)
    return 0


def _command_config(args, need_model: bool = True, check=None):
    """The command's config, checked (``check(config)``: the command's own requirements; the
    ``plugins:`` names and options) before anything heavy is imported; then the libraries are
    quietened and the threads set."""
    from ..manager import check_plugins_config
    from ..train.config import load_config, load_config_or_run

    load = load_config_or_run if args.command == "eval" else load_config
    config = load(args.config, args.overrides, need_model=need_model, need_files=True)
    if check is not None:
        check(config)
    check_plugins_config(run_config(config).plugins, where=where_of(config))
    quiet_libraries()
    from ..train.run import configure_threads

    configure_threads()
    return config


def cmd_eval(args) -> int:
    from .eval_cmd import run_eval

    run_eval(_command_config(args))
    return 0


def cmd_sft(args) -> int:
    from .sft_cmd import check_config, run_sft_command

    run_sft_command(_command_config(args, check=check_config))
    return 0


def cmd_filter(args) -> int:
    from .filter_cmd import check_config, run_filter

    run_filter(_command_config(args, need_model=False, check=check_config))
    return 0


def cmd_distill(args) -> int:
    from .distill_cmd import run_distill

    run_distill(_command_config(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _cmd_score(args) -> int:
    from .score_cmd import cmd_score

    return cmd_score(args)
