"""``rlvr score``: score saved completions with the enabled plugins, print the table, write the rows."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from ..lab.score import describe_scoring, format_table, group_warning, score_rows
from .common import quiet_libraries


def cmd_score(args) -> int:
    """``rlvr score CONFIG COMPLETIONS``: every check first, then :func:`run_score`."""
    from ..lab.score import LATE_STEP, load_completions
    from ..manager import check_plugins_config
    from ..outputs import check_output_file
    from ..train.config import load_config_or_run, run_config
    from ..train.validate import where_of

    config = load_config_or_run(args.config, args.overrides, need_data=False, need_model=False)
    check_plugins_config(run_config(config).plugins, where=where_of(config))
    rows, lines = load_completions(args.completions)
    if args.output:
        check_output_file(args.output, "--output")
    quiet_libraries()
    run_score(config, rows, args.output, LATE_STEP if args.step is None else args.step, args.completions, lines)
    return 0


NO_MODEL_NOTE = (
    "note: the config has no model section, so completion lengths (for length penalties and estimators) are "
    "counted with the demo's character tokenizer (a token per character; <think>, </think>, <answer>, </answer> "
    "one each); give model.tokenizer (or model.name_or_path) to count the policy's tokens"
)


def run_score(
    config: Mapping[str, Any],
    rows: list[dict[str, Any]],
    output: str | None,
    step: int,
    where: str = "completions",
    lines: list[int] | None = None,
) -> list[dict[str, Any]]:
    """Score ``rows`` (:func:`load_completions`, read from ``where``, at ``lines``), print the table,
    write ``output`` whole (or not at all).

    The plugins and the run are validated as ``rlvr train --check`` does
    (:func:`rlvr_plugins.train.run.validate_scoring`), and every plugin checks the rows
    (``rlvr_check_dataset``, split ``"completions"``), before anything is scored."""
    from ..outputs import write_atomic
    from ..rewards import Engines
    from ..train.data import check_rows
    from ..train.modeling import load_tokenizer
    from ..train.run import engine_options, validate_scoring
    from ..train.validate import run_config

    plugin_set = validate_scoring(config)
    check_rows(plugin_set, rows, "completions", where, lines)
    if run_config(config).model is None:
        from ..demo.tokenizer import build_char_tokenizer

        tokenizer = build_char_tokenizer()
        print(NO_MODEL_NOTE, flush=True)
    else:
        tokenizer = load_tokenizer(config)
    print(describe_scoring(plugin_set))
    warning = group_warning(rows)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    engines = Engines(**engine_options(config))
    try:
        scored = score_rows(rows, plugin_set, engines, tokenizer, step=step)
    finally:
        engines.close()
    if output:
        write_atomic(output, (json.dumps(r) + "\n" for r in scored), what="--output")
    print(format_table(scored))
    if output:
        print(f"wrote {len(scored)} rows to {output}")
    return scored
