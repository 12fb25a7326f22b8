"""Train and eval splits: a built-in synthetic task, a local JSONL file, or a hub dataset.

After loading, ``data.columns`` (or ``data.<split>.columns``, which wins for its split) renames the
source's columns to the canonical ones
(``prompt``, ``answer``, and anything a plugin reads, e.g. ``difficulty``), the enabled
template plugin renders each prompt (``rlvr_render_prompt``), and a column
``rlvr_index`` records each row's position.

``data.answer_format`` (or ``data.<split>.answer_format``) normalises the canonical
``answer`` column after the renaming: ``gsm8k`` (``… #### 1,234`` → ``1234``), ``boxed``
(a MATH-style solution → the content of its last ``\\boxed{…}``), ``olympiadbench`` (a
list of LaTeX answers → the first, without ``$``) or ``plain`` (the value as text;
``27.0`` → ``27``, ``025`` → ``25``). See :func:`normalise_answer`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, PluginValidationError, RLVRError, columns_text, shown, why_not_a_file
from ..text import gsm8k_final, last_boxed
from .config import ANSWER_FORMATS, lone_surrogate, resolve_path, run_config
from .sections import HubSplit, JsonlSplit, SplitSection, SyntheticSplit, given
from .yamlfile import digits_in, too_many_digits

SYNTHETIC_TASKS = ("arithmetic", "agentic")  # demo.task, demo.agentic (multi-digit arithmetic with a calculator)
MAX_NAMED_ROWS = 5

logger = logging.getLogger(__name__)


class DataError(RLVRError):
    """A data source that cannot be used: the message names the file, line or column."""


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """Rows of a JSONL file; errors name the file and the line."""
    return [row for _, row in read_jsonl_numbered(path)]


MAX_LINE_MB_ENV = "RLVR_MAX_LINE_MB"
DEFAULT_MAX_LINE_MB = 16


def max_line_bytes() -> int:
    """The longest JSONL line read: ``$RLVR_MAX_LINE_MB`` MiB (default 16)."""
    raw = os.environ.get(MAX_LINE_MB_ENV, "")
    try:
        megabytes = float(raw) if raw.strip() else DEFAULT_MAX_LINE_MB
    except ValueError:
        raise DataError(f"{MAX_LINE_MB_ENV}={shown(raw)} must be a number of MiB") from None
    if not megabytes > 0:
        raise DataError(f"{MAX_LINE_MB_ENV}={shown(raw)} must be a number of MiB > 0")
    return int(megabytes * 1024 * 1024)


def read_jsonl_numbered(path: str, max_bytes: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` for every non-blank line of a JSONL file; errors name the file and the line.

    A line longer than ``max_bytes`` (default :func:`max_line_bytes`) is refused without being
    read whole; so is text that is not UTF-8, or a JSON string with a lone surrogate
    (``"\\ud800"``: not text any tokenizer can encode).
    """
    limit = max_line_bytes() if max_bytes is None else max_bytes
    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {shown(path, 300)} {why_not_a_file(p)}")
    rows = []
    try:
        fh = p.open("rb")
    except OSError as exc:
        raise DataError(f"data file {shown(path, 300)} cannot be read: {exc.strerror}") from exc
    with fh:
        lineno = 0
        while line := fh.readline(limit + 1):
            lineno += 1
            if len(line) > limit and not line.endswith(b"\n"):
                raise DataError(
                    f"{path}:{lineno}: line longer than the limit of {limit} bytes; set "
                    f"{MAX_LINE_MB_ENV} (MiB, default {DEFAULT_MAX_LINE_MB}) to allow longer lines"
                )
            if line.strip():
                rows.append((lineno, _parse_line(line, path, lineno)))
    if not rows:
        raise DataError(f"data file {shown(path, 300)} is empty")
    return rows


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _parse_line(line: bytes, path: str, lineno: int) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}:{lineno}: not valid UTF-8 (byte 0x{line[exc.start]:02x} at column "
            f"{exc.start + 1}); save the file as UTF-8"
        ) from exc
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{lineno}: malformed JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise DataError(f"{path}:{lineno}: JSON nested too deeply") from exc
    except ValueError as exc:  # int()'s digit limit
        raise DataError(f"{path}:{lineno}: {too_many_digits(digits_in(exc), 'a JSONL value')}") from exc
    if not isinstance(row, dict):
        raise DataError(f"{path}:{lineno}: each line must be a JSON object, got {type(row).__name__}")
    if _SURROGATE_ESCAPE.search(line):
        try:
            column = lone_surrogate(row)
        except RecursionError as exc:
            raise DataError(f"{path}:{lineno}: JSON nested too deeply") from exc
        if column is not None:
            raise DataError(
                f"{path}:{lineno}: column {shown(column)} has a lone surrogate escape (\\ud800-"
                "\\udfff without its pair), which is not Unicode text"
            )
    return row


def _synthetic(split: str, spec: SyntheticSplit, other: SplitSection | None) -> list[dict[str, Any]]:
    from ..demo.task import eval_problems, split_train_eval

    task = spec.task
    if task not in SYNTHETIC_TASKS:
        raise ConfigError(
            f"data.{split}.task {shown(task)} is unknown; built-in synthetic tasks: {list(SYNTHETIC_TASKS)}"
        )
    sizes = {split: spec.size, "other": other.size if isinstance(other, SyntheticSplit) and other.task == task else 0}
    seed = spec.seed
    options = dict(spec.options or {})
    if task == "agentic":
        from ..demo.agentic import agent_problems, agent_train_eval

        try:
            if split == "train":
                return agent_train_eval(sizes["train"], sizes["other"], seed, **options)[0]
            return agent_problems(sizes["eval"], seed, stream="eval", unique=True, **options)  # agent_train_eval's
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"data.{split}.options: {exc}") from None
    if split == "train":
        return split_train_eval(sizes["train"], sizes["other"], seed, **options)[0]
    return eval_problems(sizes["eval"], seed, **options)  # split_train_eval's, without drawing the train set


def _hub(spec: HubSplit) -> list[dict[str, Any]]:
    import datasets

    try:
        ds = datasets.load_dataset(spec.name, spec.config, split=spec.split)
    except Exception as exc:  # no network, no such dataset or split, a gated one: the library's many classes
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise DataError(
            f"hub dataset {spec.name!r} (config {spec.config!r}, split {spec.split!r}) cannot be loaded: {reason}; "
            "check the name and the network, or give the rows as a file (source: jsonl, path: FILE)"
        ) from exc
    return [dict(row) for row in ds]


def load_rows(config: Mapping[str, Any], split: str, plugin_set=None) -> list[dict[str, Any]] | None:
    """The rows of ``data.<split>`` with canonical column names, or None if the split is absent.

    With ``plugin_set`` (a command that scores the split), every plugin checks the rows
    (:func:`check_rows`, :func:`checked_rewards`) before they are returned."""
    data = run_config(config).data
    spec = getattr(data, split)
    if data is None or spec is None:
        return None
    where = f"data.{split}"
    lines = None
    if isinstance(spec, SyntheticSplit):
        rows = _synthetic(split, spec, getattr(data, "eval" if split == "train" else "train"))
    elif isinstance(spec, JsonlSplit):
        where = resolve_path(config, spec.path)
        numbered = read_jsonl_numbered(where)
        lines = [n for n, _ in numbered]
        rows = [row for _, row in numbered]
    else:
        rows = _hub(spec)
        where = f"hub dataset {spec.name}"
    if spec.limit is not None:
        rows = rows[: spec.limit]
    rows = rename_columns(rows, spec.columns if given(spec, "columns") else data.columns, where, lines)
    answer_format = spec.answer_format if given(spec, "answer_format") else data.answer_format
    if answer_format is not None:
        rows = normalise_answers(rows, answer_format, where, lines)
    if plugin_set is not None:
        check_rows(plugin_set, rows, split, where, lines, required=checked_rewards(config, split, plugin_set))
    return rows


def checked_rewards(config: Mapping[str, Any], split: str, plugin_set) -> list[str] | None:
    """The rewards that must apply to some row of ``split`` (None: every reward). The train split: every reward
    (a run would train without one that applies to no row). Another split: the reward its accuracy is read from
    (``eval.reward``, default the first registered reward); for the others a warning suffices (a run may
    evaluate on one kind of its mixed training data)."""
    if split == "train":
        return None
    chosen = run_config(config).eval.reward
    if chosen is None:
        rewards = plugin_set.reward_functions()
        chosen = rewards[0][1].name if rewards else None
    return [chosen] if chosen is not None else []


def check_rows(
    plugin_set,
    rows: list[dict[str, Any]],
    split: str,
    where: str,
    lines: list[int] | None = None,
    required: Collection[str] | None = None,
) -> None:
    """Refuse a split that a reward can read nothing in (:func:`~rlvr_plugins.rewards.unread_columns`): every
    reward, or only those named in ``required`` (the others are warned about); then call ``rlvr_check_dataset``
    once for ``rows`` and log one warning per plugin and problem (:func:`dataset_warnings`)."""
    from ..rewards import row_columns, unread_columns

    rewards = plugin_set.reward_functions()
    present, has_values = row_columns(rows)
    named = f"the {split} split ({where})"
    consequence = "the run would train without it" if split == "train" else "it would score none of them"
    refused = [pair for pair in rewards if required is None or pair[1].name in required]
    problems = unread_columns(refused, present, has_values, named, consequence)
    if problems:
        raise DataError("; ".join(problems))
    others = [pair for pair in rewards if pair not in refused]
    for message in unread_columns(others, present, has_values, named, "it would score none of them"):
        logger.warning("%s", message)
    environments = [environment.name for _, environment in plugin_set.environments()]
    routing = environment_routing_problem(rows, environments, named, lines)
    if routing:
        raise DataError(routing)
    for plugin, problems in plugin_set.call("rlvr_check_dataset", rows=rows, split=split):
        for message in dataset_warnings(plugin, problems, len(rows), where, lines):
            logger.warning("%s", message)


ENVIRONMENT_COLUMN = "environment"
"""The column that chooses each row's environment when several are enabled (TRL's)."""


def environment_routing_problem(
    rows: Sequence[Mapping[str, Any]], environments: Sequence[str], where: str, lines: list[int] | None = None
) -> str | None:
    """The rows whose ``environment`` column names no registered environment, as one message (None when every
    row is routed). With several environments every row must name one; with one, a row may leave the column
    out; with none, the column is not read.

    >>> environment_routing_problem([{"environment": "calc"}, {}], ["calc", "python"], "data.train").split(";")[0]
    'data.train: row 1 has no environment'
    >>> environment_routing_problem([{"environment": "sql"}], ["calc"], "x.jsonl", [3])
    "x.jsonl: row 0 (line 3) has environment 'sql', which no plugin registers; registered: ['calc']"
    >>> environment_routing_problem([{"environment": "calc"}], ["calc"], "data.train") is None
    True
    """
    if not environments:
        return None
    several = len(environments) > 1
    bad = [
        i
        for i, row in enumerate(rows)
        if (row.get(ENVIRONMENT_COLUMN) is None and several)
        or (row.get(ENVIRONMENT_COLUMN) is not None and row.get(ENVIRONMENT_COLUMN) not in environments)
    ]
    if not bad:
        return None
    first = bad[0]
    value = rows[first].get(ENVIRONMENT_COLUMN)
    more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
    what = "has no environment" if value is None else f"has environment {shown(value)}, which no plugin registers"
    rule = f"registered: {list(environments)}"
    if several:
        rule = f"with several environments each row's {ENVIRONMENT_COLUMN!r} column must name one of them; {rule}"
    return f"{where}: row {first}{_line(lines, first)} {what}{more}; {rule}"


def dataset_warnings(plugin: str, problems: Any, n_rows: int, where: str, lines: list[int] | None = None) -> list[str]:
    """One line per distinct problem that ``plugin`` reported: how many rows, the problem, the
    first :data:`MAX_NAMED_ROWS` rows (``row i (line n)``) and how many more.

    >>> dataset_warnings("p", [(4, "bad"), (0, "bad"), (2, "odd")], 5, "d.jsonl", [1, 2, 3, 5, 6])
    ['p: d.jsonl: 2 rows: bad: row 0 (line 1), row 4 (line 6)', 'p: d.jsonl: 1 row: odd: row 2 (line 3)']
    """
    grouped: dict[str, list[int]] = {}
    for pair in problems or []:
        if not (
            isinstance(pair, tuple)
            and len(pair) == 2
            and isinstance(pair[0], int)
            and 0 <= pair[0] < n_rows
            and isinstance(pair[1], str)
        ):
            raise PluginValidationError(
                f"plugin {plugin!r}: rlvr_check_dataset returned {shown(pair)}; it returns "
                f"(row index in 0..{n_rows - 1}, problem text) pairs"
            )
        grouped.setdefault(pair[1], []).append(pair[0])
    out = []
    for problem, indices in grouped.items():
        indices = sorted(set(indices))
        named = ", ".join(f"row {i}{_line(lines, i)}" for i in indices[:MAX_NAMED_ROWS])
        more = f" and {len(indices) - MAX_NAMED_ROWS} more" if len(indices) > MAX_NAMED_ROWS else ""
        out.append(f"{plugin}: {where}: {len(indices)} row{'s' if len(indices) != 1 else ''}: {problem}: {named}{more}")
    return out


def rename_columns(
    rows: list[dict[str, Any]], columns: Mapping[str, str], where: str, lines: list[int] | None = None
) -> list[dict[str, Any]]:
    """Apply ``{canonical: source_column}``; every row must end up with a ``prompt``.

    ``lines``: the file line of each row (JSONL), named in errors next to the row index.
    """
    out = []
    for i, row in enumerate(rows):
        missing = [src for src in columns.values() if src not in row]
        if missing:
            raise DataError(
                f"{where}: row {i}{_line(lines, i)} has no column {shown(missing[0])} (data.columns maps to it); "
                f"columns present: {columns_text(row)}"
            )
        new = dict(row)
        for canonical, src in columns.items():
            new[canonical] = row[src]
        if "prompt" not in new:
            raise DataError(
                f"{where}: row {i}{_line(lines, i)} has no 'prompt' column; map one with data.columns "
                f"(e.g. columns: {{prompt: question}}); columns present: {columns_text(row)}"
            )
        out.append(new)
    return out


def render(rows: list[dict[str, Any]], plugin_set, tokenizer, seed: int) -> list[dict[str, Any]]:
    """Render every prompt with the template plugin and number the rows (``rlvr_index``); with an environment
    enabled, as chat messages for TRL's tool loop (``multi_turn``)."""
    out = []
    multi_turn = bool(plugin_set.environments())
    for i, row in enumerate(rows):
        prompt = plugin_set.one(
            "rlvr_render_prompt", example=row, index=i, seed=seed, tokenizer=tokenizer, multi_turn=multi_turn
        )
        out.append({**row, "raw_prompt": row["prompt"], "prompt": prompt, "rlvr_index": i})
    return out


def _line(lines: list[int] | None, i: int) -> str:
    return f" (line {lines[i]})" if lines is not None and i < len(lines) else ""


_INTEGER = re.compile(r"[-+]?\d+")
_DECIMAL = re.compile(r"[-+]?\d*\.\d+|[-+]?\d+\.\d*")


def plain_answer(value: Any) -> str:
    """A reference answer as text: numbers without a spurious ``.0`` or leading zeros, other text stripped.

    Numbers are rewritten as digit strings, exactly: a 10,000-digit integer stays itself, and
    ``3.14159265358979323846`` keeps its digits (no ``float`` rounding, no ``inf``).

    >>> [plain_answer(27.0), plain_answer("025"), plain_answer(" 1.50 "), plain_answer("x+1"), plain_answer("-0.0")]
    ['27', '25', '1.5', 'x+1', '0']
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    if _INTEGER.fullmatch(text) or _DECIMAL.fullmatch(text):
        return _plain_number(text)
    return text


def _plain_number(text: str) -> str:
    """A decimal numeral without sign ``+``, leading zeros, trailing fraction zeros or a bare point,
    exactly (digit strings, no ``int``/``float``: any number of digits, no rounding)."""
    sign = "-" if text.startswith("-") else ""
    whole, _, fraction = text.lstrip("+-").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    if whole == "0" and not fraction:
        sign = ""
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def normalise_answer(value: Any, answer_format: str) -> str | None:
    r"""The final answer in a reference, by format; None when the format's marker is missing.

    * ``gsm8k``: the number after the last ``####``, thousands commas removed (``"… #### 1,234"`` → ``"1234"``).
    * ``boxed``: the content of the last ``\boxed{…}`` of a MATH-style solution.
    * ``olympiadbench``: the first element of a list of answers, ``$`` removed
      (``["$\frac{1}{2}$"]`` → ``"\frac{1}{2}"``); a string is taken as a one-element list.
    * ``plain``: :func:`plain_answer`.

    >>> normalise_answer("She pays 2 * 600 = <<2*600=1200>>1,200.\n#### 1,200", "gsm8k")
    '1200'
    """
    if answer_format == "gsm8k":
        return gsm8k_final(str(value))
    if answer_format == "boxed":
        boxed = last_boxed(str(value))
        return None if boxed is None else boxed.strip()
    if answer_format == "olympiadbench":
        items = value if isinstance(value, list) else [value]
        if not items or items[0] is None or not str(items[0]).replace("$", "").strip():
            return None
        return str(items[0]).replace("$", "").strip()
    if answer_format == "plain":
        return plain_answer(value) if value is not None else None
    raise ConfigError(f"data.answer_format {shown(answer_format)} is unknown; supported: {list(ANSWER_FORMATS)}")


_EXPECTED = {
    "gsm8k": "a worked solution ending in '#### N'",
    "boxed": "a solution with a closed \\boxed{...}",
    "olympiadbench": "a non-empty list of answers",
    "plain": "an answer",
}


def normalise_answers(
    rows: list[dict[str, Any]], answer_format: str, where: str, lines: list[int] | None = None
) -> list[dict[str, Any]]:
    """Every row's ``answer`` normalised (:func:`normalise_answer`); the original is kept in ``raw_answer``.

    A row without an ``answer`` column, or whose answer lacks the format's marker, is a
    :class:`DataError` naming the file and line (JSONL) or the row.
    """
    if answer_format not in ANSWER_FORMATS:
        raise ConfigError(f"data.answer_format {shown(answer_format)} is unknown; supported: {list(ANSWER_FORMATS)}")
    out = []
    for i, row in enumerate(rows):
        at = f"{where}:{lines[i]}" if lines is not None and i < len(lines) else f"{where}: row {i}"
        if "answer" not in row:
            raise DataError(
                f"{at}: no 'answer' column to normalise (data.answer_format {answer_format}); map one "
                f"with data.columns (e.g. columns: {{answer: solution}}); "
                f"columns present: {columns_text(row)}"
            )
        answer = normalise_answer(row["answer"], answer_format)
        if answer is None:
            tail = str(row["answer"])
            tail = tail if len(tail) <= 80 else "…" + tail[-80:]
            raise DataError(
                f"{at}: answer_format {answer_format} expects {_EXPECTED[answer_format]} in the "
                f"'answer' column, got {tail!r}"
            )
        out.append({**row, "answer": answer, "raw_answer": row["answer"]})
    return out
