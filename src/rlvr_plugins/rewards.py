"""Reward plugins as TRL reward functions, scored through the reward engine."""

from __future__ import annotations

import dataclasses
import inspect
import math
import types
from collections.abc import Mapping, Sequence
from typing import Any

from .engine import LOG_CALLBACKS, EngineOptions, RewardEngine, ScoreResult
from .errors import PluginError
from .plugin import RewardFunction
from .text import message_text

TRL_CONTROL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})
REWARD_EXTRAS = ("completion_ids", "trainer_state", "log_metric", "log_extra", "environment")
"""What TRL offers a reward function beyond prompts, completions and columns, per completion (opt-in by keyword)."""


def score_items(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    examples: Sequence[Mapping[str, Any]],
    completion_format: str = "text",
):
    """The engine's items: one ``{"prompt", "completion", "example"}`` per completion.

    ``completion_format="messages"`` keeps a conversational completion as TRL's list of messages; as text, a
    conversational completion is what the policy wrote: its assistant turns, one per line (a multi-turn
    episode's tool turns are left out, so a tool's output never passes for the policy's answer).
    """
    as_given = completion_format == "messages"
    return [
        {
            "prompt": p,
            "completion": c if as_given else message_text(c, roles=("assistant",), sep="\n"),
            "example": dict(e),
        }
        for p, c, e in zip(prompts, completions, examples, strict=True)
    ]


def policy_text(completion: Any) -> str:
    """A completion as the text the policy wrote: a string as it is; TRL's messages as their assistant turns,
    one per line (the tool turns of an episode are left out).

    >>> policy_text([{"role": "assistant", "content": "3*4?"}, {"role": "tool", "content": "12"},
    ...              {"role": "assistant", "content": "12"}])
    '3*4?\\n12'
    """
    return message_text(completion, roles=("assistant",), sep="\n")


ITEM_COLUMNS = ("prompt", "completion")
"""A row's columns that are the item itself: every other column is the reward's ``example``."""


def example_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``example``, what a reward function sees of the dataset: every column but :data:`ITEM_COLUMNS`.

    >>> example_of({"prompt": "2+2?", "completion": "4", "answer": "4", "level": 1})
    {'answer': '4', 'level': 1}
    """
    return {k: v for k, v in row.items() if k not in ITEM_COLUMNS}


@dataclasses.dataclass(frozen=True)
class ScoreTable:
    """Every reward's raw value for every completion.

    :param values: ``(N, K)`` float64 tensor: completion ``i``, reward ``names[k]``; NaN where the
        reward does not apply (``None``) or could not score (see ``failed``).
    :param failed: ``(N, K)`` bool tensor: the engine could not score (timeout, exception, bad value).
    :param names: the ``K`` reward names, in the plugin set's order.
    """

    values: Any
    failed: Any
    names: list[str]

    def column(self, name: str) -> list[float]:
        """Reward ``name``'s ``N`` values as Python floats (NaN where none)."""
        return self.values[:, self.names.index(name)].tolist()


def score_all(
    rewards: Sequence[tuple[str, RewardFunction]],
    engines: Engines,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    rows: Sequence[Mapping[str, Any]],
) -> ScoreTable:
    """Score ``N`` completions with every reward of ``rewards`` (``[(plugin, RewardFunction)]``, ``K`` of them).

    Completion ``i`` answers ``prompts[i]``; its ``example`` is :func:`example_of` ``(rows[i])``. Each
    reward sees the completion as its ``completion_format`` asks (text, or TRL's messages). One
    :meth:`Engines.score` call per reward, counted in :meth:`Engines.failures`.
    """
    import torch

    examples = [example_of(row) for row in rows]
    n, names = len(completions), [reward.name for _, reward in rewards]
    values = torch.full((n, len(rewards)), math.nan, dtype=torch.float64)
    failed = torch.zeros((n, len(rewards)), dtype=torch.bool)
    for k, (_, reward) in enumerate(rewards):
        items = score_items(list(prompts), list(completions), examples, reward.completion_format)
        result = engines.score(reward, items)
        values[:, k] = torch.tensor(result.values, dtype=torch.float64)
        failed[:, k] = torch.tensor(result.failed, dtype=torch.bool)
    return ScoreTable(values, failed, names)


REFERENCE_COLUMNS = ("answer", "solution", "reference", "ground_truth", "gold", "target", "label", "final_answer")
"""Names datasets give a problem's reference answer (TRL and open-r1 call it ``solution``): a reward reading one
of them, on a split that has another, is told which."""

MAX_NOT_APPLICABLE = 0.5
"""The share of a training batch's completions that a reward may find "not applicable" (``None``) before the
trainer warns (once per reward): more means the reward hardly trains the policy."""


def unread_columns(
    rewards: Sequence[tuple[str, RewardFunction]],
    present: Sequence[str],
    has_values: Any,
    where: str,
    consequence: str = "the run would train without it",
) -> list[str]:
    """One problem per column a reward reads (``RewardFunction.columns``) that no row of a split has a value in.

    :param rewards: ``[(plugin, RewardFunction)]``.
    :param present: the split's column names, in order.
    :param has_values: ``has_values(column) -> bool``: some row has a value (not ``None``) in ``column``
        (called only for columns in ``present``).
    :param where: the split, for the message (``"the train split (data.train)"``).
    :param consequence: what that means for the split, for the message.

    >>> r = RewardFunction("acc", len, columns={"answer_column": "answer"})
    >>> unread_columns([("r1", r)], ["prompt", "solution"], lambda c: True, "the train split")[0]
    "reward 'acc' (plugin 'r1') reads column 'answer' (option answer_column), which no row of the train split \
has: it would apply to no item and the run would train without it; columns present: ['prompt', 'solution']; \
did you mean answer_column: solution (--set plugins.r1.answer_column=solution)?"
    """
    import difflib

    from .errors import shown

    problems = []
    for plugin, reward in rewards:
        for option, column in (reward.columns or {}).items():
            if column in present and has_values(column):
                continue
            empty = " (every value is null)" if column in present else ""
            candidates = difflib.get_close_matches(column, [c for c in present if c != column], n=1, cutoff=0.7)
            if not candidates and column in REFERENCE_COLUMNS:
                candidates = [c for c in present if c in REFERENCE_COLUMNS and c != column][:1]
            hint = (
                f"; did you mean {option}: {candidates[0]} (--set plugins.{plugin}.{option}={candidates[0]})?"
                if candidates
                else ""
            )
            problems.append(
                f"reward {reward.name!r} (plugin {plugin!r}) reads column {column!r} (option {option}), which no row "
                f"of {where} has{empty}: it would apply to no item and {consequence}; columns "
                f"present: {shown(list(present), 500, items=30)}{hint}"
            )
    return problems


def row_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], Any]:
    """``(present, has_values)`` of :func:`unread_columns` for a list of rows."""
    present: dict[str, None] = {}
    for row in rows:
        present.update(dict.fromkeys(row))
    return list(present), lambda column: any(row.get(column) is not None for row in rows)


def not_applicable_shares(values: Any, failed: Any) -> list[float]:
    """Per reward, the share of a batch's completions it did not apply to: ``None`` (NaN) but not failed.

    :param values: ``(N, K)`` rewards, NaN where none. :param failed: ``(N, K)`` bool, the engine failed.
    :returns: ``K`` shares in [0, 1] (0 for an empty batch).

    >>> import torch
    >>> nan = float("nan")
    >>> not_applicable_shares(torch.tensor([[1.0, nan], [nan, nan], [0.0, nan], [nan, 1.0]]),
    ...                       torch.tensor([[False, True], [True, False], [False, False], [False, False]]))
    [0.25, 0.5]
    """
    import torch

    n = values.shape[0]
    if n == 0:
        return [0.0] * values.shape[1]
    return ((torch.isnan(values) & ~failed).sum(dim=0).double() / n).tolist()


def reward_extras(fn: Any, isolated: bool = False) -> tuple[str, ...]:
    """The :data:`REWARD_EXTRAS` that ``fn`` declares, in that order.

    ``**kwargs`` takes all of them, except ``environment`` when ``fn`` runs in a worker process.
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return tuple(name for name in REWARD_EXTRAS if not (isolated and name == "environment"))
    names = {p.name for p in params}
    return tuple(name for name in REWARD_EXTRAS if name in names)


def add_extras(
    items: list[dict[str, Any]],
    extras: Sequence[str],
    *,
    completion_ids: Sequence[Any] | None,
    trainer_state: Any,
    environments: Sequence[Any] | None,
    isolated: bool,
) -> None:
    """Add what the function asked for (``reward_extras``) to each engine item, in place."""
    logs = tuple(name for name in extras if name in ("log_metric", "log_extra"))
    if "trainer_state" in extras and isolated and dataclasses.is_dataclass(trainer_state):
        trainer_state = state_snapshot(trainer_state)
    for i, item in enumerate(items):
        if "completion_ids" in extras:
            item["completion_ids"] = list(completion_ids[i]) if completion_ids is not None else None
        if "trainer_state" in extras:
            item["trainer_state"] = trainer_state
        if "environment" in extras:
            item["environment"] = environments[i] if environments is not None else None
        if logs:
            item[LOG_CALLBACKS] = logs


def state_snapshot(state: Any) -> types.SimpleNamespace:
    """What a worker process gets for TRL's ``TrainerState``: its fields, ``log_history`` empty.

    A plain namespace, so that a worker need not import transformers to read ``global_step``,
    and the growing log history is not shipped with every batch.
    """
    fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.name != "log_history"}
    return types.SimpleNamespace(**fields, log_history=[])


def replay_logs(result: ScoreResult, log_metric: Any, log_extra: Any) -> None:
    """Hand the ``log_metric`` / ``log_extra`` calls of every item to TRL's callbacks, in item order.

    An extra column becomes one TRL column of ``N`` values (``None`` where an item did not log it).
    """
    if not result.logs:
        return
    columns: dict[str, list[Any]] = {}
    for index, calls in enumerate(result.logs):
        for kind, name, value in calls:
            if kind == "metric" and log_metric is not None:
                log_metric(name, float(value))
            elif kind == "extra":
                columns.setdefault(name, [None] * len(result.logs))[index] = value
    if log_extra is not None:
        for column, values in columns.items():
            log_extra(column, values)


def engine_options_argument(value: Any, argument: str = "engine_options") -> dict[str, Any]:
    """``value`` checked as the keywords of :class:`Engines` (the fields of :class:`EngineOptions`), or a
    :class:`~rlvr_plugins.errors.PluginError` naming ``argument``: a value that is not a mapping, an unknown
    option (a config key such as ``workers`` is named with its Python name, ``num_workers``), a bad value.

    >>> try:
    ...     engine_options_argument({"workers": 2})
    ... except PluginError as exc:
    ...     print(str(exc).split("; valid:")[0])
    engine_options: unknown option 'workers' (that is the config's engine.workers; in Python it is 'num_workers')
    """
    import difflib

    from .engine.options import CONFIG_NAMES
    from .errors import shown

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PluginError(
            f"{argument} must be a mapping of reward engine options, got {type(value).__name__} {shown(value)}"
        )
    valid = [f.name for f in dataclasses.fields(EngineOptions)]
    python_name = {config: name for name, config in CONFIG_NAMES.items()}
    problems = []
    for key in value:
        if key in valid:
            continue
        if key in python_name:
            hint = f" (that is the config's engine.{key}; in Python it is {python_name[key]!r})"
        else:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"unknown option {shown(key)}{hint}")
    if problems:
        raise PluginError(f"{argument}: {'; '.join(problems)}; valid: {', '.join(valid)}")
    try:
        EngineOptions(**value)
    except ValueError as exc:
        raise PluginError(f"{argument}: {str(exc).removeprefix('invalid reward engine options: ')}") from None
    return dict(value)


class Engines:
    """The isolated engine (worker processes, deadline) and the in-process one, built lazily.

    Their options are :class:`EngineOptions` (a run's defaults), replaced by ``options`` and then by
    keywords; :attr:`options` holds what was given, :meth:`settings` the resolved options.
    """

    def __init__(self, options: EngineOptions | None = None, **keywords: Any):
        self.options: dict[str, Any] = {**(dataclasses.asdict(options) if options is not None else {}), **keywords}
        self.settings()  # a bad option fails here, not at the first score
        self._isolated: RewardEngine | None = None
        self._local: RewardEngine | None = None
        self._closed_stats: dict[str, Any] = {}
        self._per_reward: dict[str, list[int]] = {}

    def settings(self) -> EngineOptions:
        """The options the engines are built with (``options`` may be changed before the first score)."""
        return EngineOptions(**self.options)

    def isolates(self, reward: RewardFunction) -> bool:
        """True when ``reward`` is scored in worker processes."""
        return reward.isolated and not self.settings().in_process

    def for_reward(self, reward: RewardFunction) -> RewardEngine:
        if self.isolates(reward):
            if self._isolated is None:
                self._isolated = self._engine(in_process=False)
            return self._isolated
        if self._local is None:
            self._local = self._engine(in_process=True)
        return self._local

    def _engine(self, in_process: bool) -> RewardEngine:
        return RewardEngine(self.settings(), in_process=in_process)

    def score(self, reward: RewardFunction, items: list[dict[str, Any]], counted: bool = True) -> ScoreResult:
        """Score ``items`` with ``reward``; ``counted=False`` (the start-up probe) leaves :meth:`failures` alone."""
        result = self.for_reward(reward).score(reward.name, reward.fn, items)
        if not counted:
            return result
        counts = self._per_reward.setdefault(reward.name, [0, 0])
        counts[0] += len(items)
        counts[1] += sum(result.failed)
        return result

    def failures(self) -> dict[str, dict[str, int]]:
        """Per reward, over the life of this object: ``{"items": scored, "failed": items without a score}``."""
        return {name: {"items": n, "failed": failed} for name, (n, failed) in self._per_reward.items()}

    def stats(self) -> dict[str, Any]:
        """Cumulative counts over the life of this object, engines closed since included."""
        out = dict(self._closed_stats)
        for engine in (self._isolated, self._local):
            if engine is not None:
                for key, value in engine.stats.items():
                    out[key] = out.get(key, 0) + value
        return out

    def close(self) -> None:
        self._closed_stats = self.stats()
        for engine in (self._isolated, self._local):
            if engine is not None:
                engine.close()
        self._isolated = self._local = None


def probe_rewards(rewards: Sequence[tuple[str, RewardFunction]], engines: Engines) -> None:
    """Score each reward's own ``example`` once; :class:`~rlvr_plugins.errors.PluginError` listing every reward
    that fails on it (raises, cannot be shipped to a worker, times out, returns no usable value)."""
    from .errors import RLVRError

    problems = []
    for plugin, reward in rewards:
        if reward.example is None:
            continue
        item = {"example": {}, **reward.example}
        try:
            result = engines.score(reward, [item], counted=False)
            error = result.errors[0] if result.failed[0] else None
        except RLVRError as exc:
            error = str(exc)
        if error is not None:
            problems.append(f"reward {reward.name!r} (plugin {plugin!r}) fails on its own example: {error}")
    if problems:
        raise PluginError(
            "; ".join(problems) + ". It would fail on every row: fix the plugin or disable it (--disable NAME)"
        )


class EngineAdapter:
    """What TRL calls as a reward function and the engine scores: after each call, ``last_failed`` (one flag per
    completion: no score because the engine could not give one) and ``pending_error`` (an error the trainer
    raises on every process once the batch's rewards are gathered, or ``None``)."""

    def __init__(self) -> None:
        self.last_failed: list[bool] = []
        self.pending_error: BaseException | None = None


class TRLReward(EngineAdapter):
    """One reward plugin seen by TRL: ``f(prompts, completions, **columns) -> list[float]``.

    A completion the engine could not score (timeout, exception) comes back as NaN and is
    recorded in ``last_failed``; the trainer masks it (left out of the group baseline,
    advantage 0). ``None`` from the plugin (reward does not apply) is NaN too, but not a
    failure: TRL's semantics for rewards that apply to part of the data.

    An error that must stop the run (a contract violation, a plugin failing K times in a
    row) is not raised here but kept in ``pending_error`` and the batch is returned as
    failed: the trainer raises it after every process has gathered its rewards, on every
    process at once, so one rank's error cannot leave the others waiting in a collective.
    """

    def __init__(self, reward: RewardFunction, plugin: str, engines: Engines):
        super().__init__()
        self.reward, self.plugin, self.engines = reward, plugin, engines
        self.__name__ = reward.name
        self.isolated = engines.isolates(reward)
        self.extras = reward_extras(reward.fn, self.isolated)
        if "environment" in self.extras and self.isolated:
            raise PluginError(
                f"reward {reward.name!r} (plugin {plugin!r}) takes `environment`, which lives in the "
                "trainer's process: register it with isolated=False"
            )

    def __call__(
        self,
        prompts,
        completions,
        completion_ids=None,
        trainer_state=None,
        log_extra=None,
        log_metric=None,
        environments=None,
        **columns,
    ) -> list[float]:
        keys = [k for k in columns if k not in TRL_CONTROL_KWARGS]
        examples = [{k: columns[k][i] for k in keys} for i in range(len(prompts))]
        items = score_items(prompts, completions, examples, self.reward.completion_format)
        add_extras(
            items,
            self.extras,
            completion_ids=completion_ids,
            trainer_state=trainer_state,
            environments=environments,
            isolated=self.isolated,
        )
        try:
            result = self.engines.score(self.reward, items)
        except Exception as exc:
            self.pending_error = exc
            self.last_failed = [True] * len(prompts)
            return [math.nan] * len(prompts)
        replay_logs(result, log_metric, log_extra)
        self.last_failed = list(result.failed)
        return list(result.values)  # NaN where failed: the engine leaves failed items unscored


BATCH_VALUES = "__rlvr_batch_values__"
"""The ``log_extra`` column through which :class:`BatchCall` hands a batch's values back from the engine."""


class BatchCall:
    """A TRL reward function as one engine job: ``fn(**batch)`` once for a whole batch.

    ``batch`` holds TRL's keyword arguments (``prompts``, ``completions``, ``completion_ids``,
    ``trainer_state``, the columns, as lists); ``log_metric`` / ``log_extra`` are the engine's
    recording callbacks. The engine's value contract is one number per job, so the batch's values
    travel back through the log channel (the :data:`BATCH_VALUES` column) and the job's own value
    is ``None``. Module-level, so that it pickles to a worker process with the function inside.
    """

    def __init__(self, fn: Any):
        self.fn = fn

    def __call__(self, *, batch: dict[str, Any], log_metric: Any, log_extra: Any) -> None:
        from .engine.calls import run_coroutine

        values = self.fn(**batch, log_metric=log_metric, log_extra=log_extra)
        if inspect.isawaitable(values):
            values = run_coroutine(values)
        log_extra(BATCH_VALUES, list(values))
        return None


class TRLBatchReward(EngineAdapter):
    """A TRL reward function (``reward_funcs``) run through the reward engine: each batch is one engine job.

    In a worker process (``isolated``), the engine's deadline ``timeout_s`` bounds the whole call;
    a call that times out or crashes its worker leaves every completion of the batch without a score
    (``last_failed``), like a plugin reward's item. An exception is the function's own in-process
    and a :class:`~rlvr_plugins.engine.RewardFunctionError` from a worker, kept in ``pending_error``
    (the trainer raises it on every process) unless ``on_error="mask"``. ``None`` means no score, as in TRL.
    """

    def __init__(self, fn: Any, name: str, engines: Engines):
        super().__init__()
        self.fn, self.__name__, self.engines = fn, name, engines
        self.reward = RewardFunction(name, BatchCall(fn), isolated=True)

    def __call__(
        self,
        prompts,
        completions,
        completion_ids=None,
        trainer_state=None,
        log_extra=None,
        log_metric=None,
        environments=None,
        **columns,
    ) -> list[float]:
        n = len(prompts)
        if dataclasses.is_dataclass(trainer_state) and self.engines.isolates(self.reward):
            trainer_state = state_snapshot(trainer_state)
        batch = {
            "prompts": list(prompts),
            "completions": list(completions),
            "completion_ids": None if completion_ids is None else [list(ids) for ids in completion_ids],
            "trainer_state": trainer_state,
            **{k: list(v) for k, v in columns.items()},
        }
        self.last_failed = [True] * n
        try:
            result = self.engines.score(self.reward, [{"batch": batch, LOG_CALLBACKS: ("log_metric", "log_extra")}])
        except Exception as exc:
            self.pending_error = exc
            return [math.nan] * n
        if result.failed[0]:
            return [math.nan] * n
        calls = (result.logs or [[]])[0]
        values = next(value for kind, name, value in calls if kind == "extra" and name == BATCH_VALUES)
        for kind, name, value in calls:
            if kind == "metric" and log_metric is not None:
                log_metric(name, float(value))
            elif kind == "extra" and name != BATCH_VALUES and log_extra is not None:
                log_extra(name, value)
        if len(values) != n:
            self.pending_error = ValueError(
                f"The reward function '{self.__name__}' returned {len(values)} rewards, but {n} were expected "
                "(one per prompt-completion pair). Make sure the reward function returns exactly one reward per "
                "completion."
            )
            return [math.nan] * n
        self.last_failed = [False] * n
        return [math.nan if v is None else float(v) for v in values]
