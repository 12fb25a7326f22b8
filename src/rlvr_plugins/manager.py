"""Find plugins (built-ins and the ``rlvr_plugins`` entry-point group), enable and configure them.

Built-in plugins are listed in :data:`BUILTIN_PLUGINS` and go through exactly the same
path as third-party ones. Entry points are imported lazily: only the plugins a config
enables are imported (``rlvr plugins`` imports them all to list their hooks). The
environment variable ``RLVR_LOAD_PLUGINS`` (comma-separated names; empty for none)
restricts which entry-point plugins are visible at all.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata as md
import inspect
import os
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pluggy

from . import ENTRY_POINT_GROUP, PROJECT, __version__, fields, hookspecs
from .errors import (
    ConfigError,
    PluginConflictError,
    PluginError,
    PluginImportError,
    PluginOptionError,
    PluginValidationError,
    UnknownPluginError,
    shown,
)
from .plugin import Environment, Plugin, RewardExploit, RewardFunction, describe_options
from .schedules import SCHEDULE_NOTE, WeightSchedule, parse_schedule
from .segment_plan import SegmentPlan, segment_conflict

BUILTIN_PLUGINS = {
    "grpo": "rlvr_plugins.builtin.estimators:GRPOEstimator",
    "rloo": "rlvr_plugins.builtin.estimators:RLOOEstimator",
    "batch-std": "rlvr_plugins.builtin.estimators:BatchStdEstimator",
    "mean-baseline": "rlvr_plugins.builtin.estimators:MeanBaselineEstimator",
    "normalize-then-sum": "rlvr_plugins.builtin.estimators:NormalizeThenSumEstimator",
    "gdpo": "rlvr_plugins.builtin.estimators:GDPOEstimator",
    "reinforce++": "rlvr_plugins.builtin.estimators:ReinforcePPEstimator",
    "reinforce++-baseline": "rlvr_plugins.builtin.estimators:ReinforcePPBaselineEstimator",
    "opo": "rlvr_plugins.builtin.estimators:OPOEstimator",
    "gpg": "rlvr_plugins.builtin.estimators:GPGEstimator",
    "pass-at-k": "rlvr_plugins.builtin.estimators:PassAtKEstimator",
    "dapo-overlong": "rlvr_plugins.builtin.shaping:DAPOOverlong",
    "cosine-length": "rlvr_plugins.builtin.shaping:CosineLength",
    "prime-length": "rlvr_plugins.builtin.shaping:PrimeLength",
    "repetition": "rlvr_plugins.builtin.repetition:RepetitionPenalty",
    "repeat-sampler": "rlvr_plugins.builtin.sampler:RepeatSamplerPlugin",
    "plain-template": "rlvr_plugins.builtin.template:PlainTemplate",
    "policy-loss": "rlvr_plugins.builtin.loss:PolicyLoss",
    "reward-model": "rlvr_plugins.builtin.reward_model:RewardModel",
    "calculator": "rlvr_plugins.builtin.calculator:Calculator",
    "dapo-dynamic-sampling": "rlvr_plugins.builtin.dynamic_sampling:DAPODynamicSampling",
}

DEFAULTS = {
    "rlvr_compute_advantages": "grpo",
    "rlvr_train_sampler": "repeat-sampler",
    "rlvr_render_prompt": "plain-template",
}

NO_REWARD_SOURCE = (
    "No reward source provided. Pass `reward_funcs`, or an `environment_factory` whose environment defines a "
    "`get_reward` method."
)
"""TRL's ``GRPOTrainer`` error for a run without rewards; ours says it first (TRL users match on it), then adds."""

HOOK_NAMES = tuple(name for name, obj in vars(hookspecs).items() if name.startswith("rlvr_") and callable(obj))

_temporary: dict[str, PluginEntry] = {}


@dataclass
class PluginEntry:
    """A plugin that can be enabled: where it comes from and how to import it."""

    name: str
    target: str | type
    distribution: str
    version: str
    _cls: type | None = field(default=None, repr=False)

    def load(self) -> type[Plugin]:
        if self._cls is None:
            self._cls = _import_target(self.name, self.target, self.distribution)
        return self._cls


def _import_target(name: str, target: str | type, distribution: str) -> type[Plugin]:
    cls: Any
    if isinstance(target, type):
        cls = target
    else:
        module_name, _, attr = target.partition(":")
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except Exception as exc:
            raise PluginImportError(name, target, distribution, exc) from exc
        cls = obj
    if not (isinstance(cls, type) and issubclass(cls, Plugin)):
        raise PluginValidationError(
            f"plugin {name!r} ({distribution}): {target!r} is not a subclass of rlvr_plugins.Plugin"
        )
    if cls.name != name:
        raise PluginValidationError(
            f"plugin {name!r} ({distribution}): the class {cls.__qualname__} declares name {cls.name!r}; "
            "the entry-point name and Plugin.name must be equal"
        )
    return cls


def _builtin_entries() -> list[PluginEntry]:
    return [PluginEntry(name, target, "rlvr-plugins", __version__) for name, target in BUILTIN_PLUGINS.items()]


def _entry_point_entries() -> list[PluginEntry]:
    allowed = os.environ.get("RLVR_LOAD_PLUGINS")
    allowed_names = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
    entries = []
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        if allowed_names is not None and ep.name not in allowed_names:
            continue
        dist = ep.dist.name if ep.dist is not None else "unknown"
        version = ep.dist.version if ep.dist is not None else "unknown"
        entries.append(PluginEntry(ep.name, ep.value, dist, version))
    return entries


def discover() -> dict[str, PluginEntry]:
    """Every plugin that can be enabled, by name. Two sources claiming one name is an error."""
    found: dict[str, PluginEntry] = {}
    for entry in [*_builtin_entries(), *_entry_point_entries(), *_temporary.values()]:
        previous = found.get(entry.name)
        if previous is not None and previous.distribution != entry.distribution:
            raise PluginValidationError(
                f"duplicate plugin name {entry.name!r}: provided by {previous.distribution} ({previous.target}) "
                f"and by {entry.distribution} ({entry.target}); uninstall one of them"
            )
        found[entry.name] = entry
    return found


@contextlib.contextmanager
def temporary_plugin(cls: type[Plugin], distribution: str = "in-process") -> Iterator[type[Plugin]]:
    """Make ``cls`` discoverable for the duration of a ``with`` block (tests, notebooks)."""
    if cls.name in _temporary:
        raise PluginValidationError(f"plugin {cls.name!r} is already registered temporarily")
    _temporary[cls.name] = PluginEntry(cls.name, cls, distribution, "0", cls)
    try:
        yield cls
    finally:
        _temporary.pop(cls.name, None)


def implemented_hooks(cls: type) -> list[str]:
    return sorted(name for name in HOOK_NAMES if _is_hookimpl(getattr(cls, name, None)))


def _is_hookimpl(obj: Any) -> bool:
    return obj is not None and hasattr(obj, f"{PROJECT}_impl")


IGNORED_IMPL_OPTIONS = ("hookwrapper", "wrapper", "tryfirst", "trylast")


def _check_impl_options(name: str, cls: type) -> None:
    """Refuse pluggy options that the one call path would ignore (hooks run in config order, no wrappers)."""
    for hook in HOOK_NAMES:
        opts = getattr(getattr(cls, hook, None), f"{PROJECT}_impl", None) or {}
        used = [opt for opt in IGNORED_IMPL_OPTIONS if opts.get(opt)]
        if used:
            raise PluginValidationError(
                f"plugin {name!r}: {cls.__qualname__}.{hook} is declared with {', '.join(f'{o}=True' for o in used)}, "
                "which rlvr-plugins does not support (hooks run in the config's plugin order); remove it"
            )


def _check_hook_names(name: str, cls: type) -> None:
    for attr, value in inspect.getmembers(cls):
        looks_like_hook = attr.startswith("rlvr_") or _is_hookimpl(value)
        if looks_like_hook and attr not in HOOK_NAMES:
            close = difflib.get_close_matches(attr, HOOK_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known hooks: {', '.join(HOOK_NAMES)}"
            raise PluginValidationError(f"plugin {name!r}: {cls.__qualname__}.{attr} matches no hook spec{hint}")
        if attr in HOOK_NAMES and callable(value) and not _is_hookimpl(value):
            raise PluginValidationError(
                f"plugin {name!r}: {cls.__qualname__}.{attr} is not decorated with @rlvr_plugins.hookimpl"
            )
        if attr in HOOK_NAMES and _is_hookimpl(value):
            _check_hook_arguments(name, cls, attr, value)
    _check_impl_options(name, cls)


def _check_hook_arguments(name: str, cls: type, hook: str, impl: Callable) -> None:
    """A hook implementation may take any subset of its spec's arguments, by name; any other name is refused,
    with the spec's arguments (pluggy's own message names neither the plugin's option nor a fix)."""
    spec = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    params = list(inspect.signature(impl).parameters)
    if not isinstance(inspect.getattr_static(cls, hook), staticmethod):
        params = params[1:]  # self
    taken = [p for p in params if p not in spec]
    if taken:
        hints = [
            f"{a!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(a, spec, n=1)) else repr(a)
            for a in taken
        ]
        raise PluginValidationError(
            f"plugin {name!r}: {cls.__qualname__}.{hook} takes argument(s) {', '.join(hints)} that {hook} does "
            f"not pass; it passes (take any of them, by name): {', '.join(spec) or '(none)'}"
        )


@dataclass
class EnabledPlugin:
    name: str
    instance: Plugin
    entry: PluginEntry
    default: bool = False
    weight_schedule: WeightSchedule | None = None


@dataclass
class HookCall:
    """One call of one plugin's hook implementation, as a monitor sees it (``result``, ``error`` and ``ms``
    are filled in after the call)."""

    hook: str
    plugin: str
    kwargs: dict[str, Any]
    result: Any = None
    error: BaseException | None = None
    ms: float | None = None


TRACE_ENV = "RLVR_TRACE_PLUGINS"

_monitors: list[tuple[Callable[[HookCall], None] | None, Callable[[HookCall], None] | None]] = []


@contextlib.contextmanager
def monitoring(before: Callable[[HookCall], None] | None, after: Callable[[HookCall], None] | None) -> Iterator[None]:
    """Within the block, every :class:`PluginSet` built gets ``add_monitor(before, after)`` (so a test sees the
    hook calls of a command that builds its own plugin set)."""
    _monitors.append((before, after))
    try:
        yield
    finally:
        _monitors.remove((before, after))


class PluginSet:
    """The plugins of one run, registered in a pluggy ``PluginManager``.

    Every hook is called through pluggy's caller, one plugin at a time in the config's order
    (:meth:`call`, :meth:`one`), so hook-call monitors (:meth:`add_monitor`, ``RLVR_TRACE_PLUGINS=1``)
    see each call with the plugin that answered it.
    """

    def __init__(self, enabled: list[EnabledPlugin]):
        self.enabled = enabled
        self._rewards: list[tuple[str, RewardFunction]] | None = None
        self._environments: list[tuple[str, Environment]] | None = None
        self._validated: tuple[Any, float | None] | None = None
        self.adjusted_args: Any = None
        self._callers: dict[tuple[str, str], Any] = {}
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        for plugin in enabled:
            _check_impl_options(plugin.name, type(plugin.instance))
            try:
                self.pm.register(plugin.instance, name=plugin.name)
            except pluggy.PluginValidationError as exc:
                raise PluginValidationError(f"plugin {plugin.name!r}: {exc}") from exc
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginValidationError(str(exc)) from exc
        if os.environ.get(TRACE_ENV, "") not in ("", "0"):
            self.add_monitor(None, print_trace)
        for before, after in _monitors:
            self.add_monitor(before, after)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.enabled]

    def get(self, name: str) -> Plugin:
        return cast(Plugin, self.pm.get_plugin(name))

    def implementers(self, hook: str) -> list[str]:
        """The enabled plugins that implement ``hook``, in the config's order."""
        have = {impl.plugin_name for impl in self.pm.hook.__dict__[hook].get_hookimpls()}
        return [name for name in self.names if name in have]

    def call(
        self,
        hook: str,
        *,
        only: Collection[str] | None = None,
        after_each: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> list[tuple[str, Any]]:
        """Call every implementation of ``hook`` in the config's order; return ``(plugin, result)`` pairs.

        Each plugin is called through pluggy's own caller (a subset caller holding that plugin
        alone), so monitors see one event per plugin. Results keep the name of the plugin
        that returned them (``None`` included), so the caller can log per plugin and name a
        culprit. ``only``: call just these plugins (e.g. those that saved a state).
        ``after_each(plugin)`` runs after each implementation (to see what that plugin changed).
        """
        firstresult = self._firstresult(hook)
        out = []
        for name in self.implementers(hook):
            if only is not None and name not in only:
                continue
            result = self._caller(hook, name)(**kwargs)
            if not firstresult:
                result = result[0] if result else None
            out.append((name, result))
            if after_each is not None:
                after_each(name)
        return out

    def first(self, hook: str, **kwargs: Any) -> tuple[str, Any] | None:
        """Call ``hook``'s implementations in the config's order until one returns a value other
        than ``None`` (an abstaining hook); return ``(plugin, result)``, or ``None`` when all abstain."""
        for name in self.implementers(hook):
            ((_, result),) = self.call(hook, only=[name], **kwargs)
            if result is not None:
                return name, result
        return None

    def one(self, hook: str, **kwargs: Any) -> Any:
        """Call a one-winner hook (exactly one implementation is registered)."""
        return getattr(self.pm.hook, hook)(**kwargs)

    def answer(self, hook: str, **kwargs: Any) -> tuple[str, Any] | None:
        """Call a one-winner hook whose implementations may abstain (``hookspecs.ABSTAINING_HOOKS``): the one
        answer that is not ``None``, with its plugin's name; ``None`` when every plugin abstains.
        Raises :class:`PluginConflictError` when several answer."""
        answers = [(name, value) for name, value in self.call(hook, **kwargs) if value is not None]
        if len(answers) > 1:
            raise PluginConflictError(hook, [name for name, _ in answers])
        return answers[0] if answers else None

    def add_monitor(
        self, before: Callable[[HookCall], None] | None, after: Callable[[HookCall], None] | None
    ) -> Callable[[], None]:
        """Watch every hook call: ``before(call)`` and ``after(call)`` receive a :class:`HookCall`
        (after: with its result or error and milliseconds). Returns a function that removes the monitor."""
        started: list[tuple[HookCall, float]] = []

        def on_before(hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
            call = HookCall(hook_name, ",".join(i.plugin_name for i in impls), dict(kwargs))
            started.append((call, time.perf_counter()))
            if before is not None:
                before(call)

        def on_after(outcome: Any, hook_name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
            call, t = started.pop()
            call.ms = 1000 * (time.perf_counter() - t)
            call.error = outcome.exception
            if call.error is None:
                result = outcome.get_result()
                call.result = (result[0] if result else None) if not self._firstresult(hook_name) else result
            if after is not None:
                after(call)

        return self.pm.add_hookcall_monitoring(on_before, on_after)

    def _firstresult(self, hook: str) -> bool:
        return bool(self.pm.hook.__dict__[hook].spec.opts.get("firstresult"))

    def _caller(self, hook: str, name: str) -> Any:
        key = (hook, name)
        if key not in self._callers:
            others = [p.instance for p in self.enabled if p.name != name]
            self._callers[key] = self.pm.subset_hook_caller(hook, remove_plugins=others)
        return self._callers[key]

    def implements(self, hook: str) -> bool:
        return bool(self.pm.hook.__dict__[hook].get_hookimpls())

    def winner(self, hook: str) -> str:
        impls = self.pm.hook.__dict__[hook].get_hookimpls()
        return impls[-1].plugin_name

    def is_default(self, name: str) -> bool:
        """True when ``name`` answers only because nobody else does (a built-in default)."""
        return any(p.name == name and p.default for p in self.enabled)

    def replace_default(self, hook: str, name: str) -> PluginSet:
        """A copy of this set in which the built-in ``name`` answers ``hook`` instead of the default.

        The rewards already collected are kept (``rlvr_reward_functions`` is not called again).
        """
        entry = discover()[name]
        cls = entry.load()
        kept = [p for p in self.enabled if not (p.default and hook in implemented_hooks(type(p.instance)))]
        replaced = PluginSet([*kept, EnabledPlugin(entry.name, cls(cls.Options()), entry, default=True)])
        replaced._rewards = self._rewards
        replaced._environments = self._environments
        replaced._validated = self._validated
        replaced.adjusted_args = self.adjusted_args
        return replaced

    def weight_factor(self, plugin: str, step: int) -> float:
        """The value at ``step`` of ``plugin``'s weight schedule; 1.0 when it has none."""
        for p in self.enabled:
            if p.name == plugin and p.weight_schedule is not None:
                return p.weight_schedule.at(step)
        return 1.0

    def scheduled_weights(self, step: int) -> dict[str, float]:
        """``{name: weight at step}`` for every scheduled reward (its registered weight times the
        schedule) and every scheduled length-penalty plugin (the schedule), for ``weights/<name>``."""
        scheduled = {p.name for p in self.enabled if p.weight_schedule is not None}
        if not scheduled:
            return {}
        out = {
            r.name: r.weight * self.weight_factor(plugin, step)
            for plugin, r in self.reward_functions()
            if plugin in scheduled
        }
        for plugin in self.implementers("rlvr_length_penalty"):
            if plugin in scheduled:
                out[plugin] = self.weight_factor(plugin, step)
        return out

    def reward_weight_factors(self, names: Sequence[str], step: int) -> list[float]:
        """One factor per reward of ``names`` (TRL's and the plugins'): its plugin's schedule at ``step``, else 1.0."""
        if all(p.weight_schedule is None for p in self.enabled):
            return [1.0] * len(names)
        owner = {r.name: plugin for plugin, r in self.reward_functions()}
        return [self.weight_factor(owner[n], step) if n in owner else 1.0 for n in names]

    def reward_functions(self) -> list[tuple[str, RewardFunction]]:
        """Every registered reward as ``(plugin name, RewardFunction)``, names unique.

        ``rlvr_reward_functions`` is called once per plugin set; later calls return the same list.
        """
        if self._rewards is None:
            self._rewards = self._collect_rewards()
        return list(self._rewards)

    def _collect_rewards(self) -> list[tuple[str, RewardFunction]]:
        return self._registered(
            "rlvr_reward_functions",
            RewardFunction,
            lambda r: r.name,
            lambda r: (f"reward name {r.name!r}", "reward names must be unique"),
        )

    def _registered(
        self,
        hook: str,
        record_type: type,
        key: Callable[[Any], Any],
        clash: Callable[[Any], tuple[str, str]],
        check: Callable[[str, Any], None] | None = None,
        **kwargs: Any,
    ) -> list[tuple[str, Any]]:
        """Call the registration hook ``hook`` once per implementing plugin, in the config's order, with a
        ``register`` callback; return the registered records as ``(plugin, record)``. A record that is not a
        ``record_type`` is refused naming the plugin; ``check(plugin, record)`` may refuse more; two records
        with one ``key`` are refused naming both plugins, in the words of ``clash(record)``: ``(what, rule)``."""
        found: list[tuple[str, Any]] = []
        current = {"plugin": ""}

        def register(record: Any) -> None:
            plugin = current["plugin"]
            if not isinstance(record, record_type):
                raise PluginValidationError(
                    f"plugin {plugin!r} registered {type(record).__name__} {record!r}; "
                    f"register() takes an rlvr_plugins.{record_type.__name__}"
                )
            if check is not None:
                check(plugin, record)
            for owner, other in found:
                if key(other) == key(record):
                    what, rule = clash(record)
                    raise PluginConflictError(
                        f"{hook} ({what})",
                        [owner, plugin],
                        f"{what} is registered by plugin {owner!r} and by plugin {plugin!r}; {rule}",
                    )
            found.append((plugin, record))

        for plugin in self.implementers(hook):
            current["plugin"] = plugin
            self.call(hook, only=[plugin], register=register, **kwargs)
        return found

    def environments(self) -> list[tuple[str, Environment]]:
        """Every registered environment as ``(plugin name, Environment)``, names unique.

        ``rlvr_environments`` is called once per plugin set; later calls return the same list.
        """
        if self._environments is None:
            self._environments = self._registered(
                "rlvr_environments",
                Environment,
                lambda e: e.name,
                lambda e: (f"environment name {e.name!r}", "environment names must be unique"),
            )
        return list(self._environments)

    def environment_factory(self) -> Any:
        """TRL's ``environment_factory`` for the registered environments: ``None`` when there are none,
        the factory when there is one, ``{name: factory}`` when there are several (rows route by their
        ``environment`` column)."""
        environments = [environment for _, environment in self.environments()]
        if not environments:
            return None
        if len(environments) == 1:
            return environments[0].factory
        return {environment.name: environment.factory for environment in environments}

    def reward_exploits(self) -> list[tuple[str, RewardExploit]]:
        """Every exploit class the plugins ship (``rlvr_reward_exploits``) as ``(plugin name, RewardExploit)``,
        each for a registered reward, ``(reward, name)`` unique."""
        names = [reward.name for _, reward in self.reward_functions()]

        def for_a_registered_reward(plugin: str, exploit: RewardExploit) -> None:
            if exploit.reward not in names:
                raise PluginValidationError(
                    f"plugin {plugin!r} registered exploit {exploit.name!r} for reward {exploit.reward!r}, "
                    f"which is not registered; registered: {names}"
                )

        return self._registered(
            "rlvr_reward_exploits",
            RewardExploit,
            lambda x: (x.reward, x.name),
            lambda x: (f"exploit {x.name!r} of reward {x.reward!r}", "exploit names must be unique per reward"),
            check=for_a_registered_reward,
            reward_names=list(names),
        )

    def adjust_grpo_config(self, kwargs: dict[str, Any], trainer_section: Mapping[str, Any]) -> dict[str, str]:
        """Let each plugin adjust ``kwargs`` (``rlvr_adjust_grpo_config``, config order); return which plugin
        set which key. Two plugins that set one field to different values is an error naming both."""
        owners: dict[str, tuple[str, Any]] = {}
        before = dict(kwargs)

        def record(plugin: str) -> None:
            nonlocal before
            for key, value in kwargs.items():
                if key in before and _same(before[key], value):
                    continue
                if key in owners and not _same(owners[key][1], value):
                    other, first = owners[key]
                    raise ConfigError(
                        f"plugins {other!r} and {plugin!r} both set trainer.{key}, to {first!r} and "
                        f"{value!r}; enable only one of them or make their options agree"
                    )
                owners[key] = (plugin, value)
            before = dict(kwargs)

        self.call("rlvr_adjust_grpo_config", after_each=record, grpo_kwargs=kwargs, trainer_section=trainer_section)
        return {key: plugin for key, (plugin, _) in owners.items()}

    def validate_run(
        self,
        grpo_args: Any,
        engine_timeout_s: float | None = None,
        environment_factory: Any = None,
        other_rewards: Sequence[str] = (),
        tools: Any = None,
    ) -> None:
        """Require a reward source, then let every plugin check the run (``rlvr_validate_run``).

        A reward source is a reward plugin, a reward of ``other_rewards`` (the names of the TRL
        reward functions a script passed, which come first in ``reward_names``), or (as in TRL) an
        ``environment_factory`` whose environment owns the reward through ``get_reward``; TRL checks
        the latter and raises its own ``ValueError`` when the environment has none.

        Runs once per run: a second call with the same ``grpo_args`` object and deadline (``rlvr train``
        checks before the trainer is built, then builds it with those arguments) does nothing.
        """
        if self._validated is not None and self._validated[0] is grpo_args and self._validated[1] == engine_timeout_s:
            return
        names = [*other_rewards, *(reward.name for _, reward in self.reward_functions())]
        own_environments = self.environment_factory()
        if not names and not (environment_factory or own_environments):
            raise PluginError(
                f"{NO_REWARD_SOURCE} rlvr-plugins: no reward function is enabled: enable at least one reward plugin "
                "(for example r1-accuracy), or pass an environment_factory whose environment defines get_reward"
            )
        self.check_claims()
        self.check_pool_sampler()
        multi_turn = bool(tools or environment_factory or own_environments)
        self.call(
            "rlvr_validate_run",
            reward_names=names,
            grpo_args=grpo_args,
            engine_timeout_s=engine_timeout_s,
            multi_turn=multi_turn,
        )
        self._validated = (grpo_args, engine_timeout_s)

    def check_claims(self) -> None:
        """Refuse two plugins whose ``rlvr_claims`` name the same thing, naming both and the claim."""
        owners: dict[str, list[str]] = {}
        for plugin, claims in self.call("rlvr_claims"):
            if claims is None:
                continue
            if isinstance(claims, str) or not all(isinstance(c, str) for c in claims):
                raise PluginValidationError(
                    f"plugin {plugin!r}: rlvr_claims returned {claims!r}; expected a list of strings or None"
                )
            for claim in dict.fromkeys(claims):
                owners.setdefault(claim, []).append(plugin)
        for claim, plugins in owners.items():
            if len(plugins) > 1:
                raise PluginConflictError(
                    f"rlvr_claims ({claim!r})",
                    plugins,
                    f"plugins {', '.join(repr(p) for p in plugins)} both claim {claim!r} (rlvr_claims), which one "
                    "plugin alone may take charge of; enable only one of them.",
                )

    def learning_sampler(self) -> str | None:
        """The train sampler's plugin when it learns from the groups' rewards (``rlvr_on_rewards``) without keeping
        its groups in flight (``rlvr_pool_started``): it cannot tell a group that finishes rounds or steps after it
        was drawn. None otherwise."""
        on_rewards = set(self.implementers("rlvr_on_rewards")) - set(self.implementers("rlvr_pool_started"))
        return next((name for name in self.implementers("rlvr_train_sampler") if name in on_rewards), None)

    def check_segments(self, grpo_args: Any, multi_turn: bool) -> None:
        """Refuse a partial-rollouts plan (``rlvr_rollout_segments``) beside settings it cannot run with
        (:func:`~rlvr_plugins.segment_plan.segment_conflict`): every command that checks a run (``prepare``) calls
        it before any model loads; the trainer checks again with what a script passes it (tools, a ``rollout_func``)."""
        answer = self.answer("rlvr_rollout_segments", grpo_args=grpo_args)
        if answer is None or not isinstance(answer[1], SegmentPlan):
            return  # none, or not a plan: the trainer names the wrong return type
        name, plan = answer
        refused = segment_conflict(
            plan,
            learner=self.learning_sampler(),
            multi_turn=multi_turn,
            rollout_func=False,
            paged=bool(getattr(grpo_args, "use_transformers_paged", False)),
            loss_type=grpo_args.loss_type,
            use_vllm=bool(grpo_args.use_vllm),
            is_correction=bool(grpo_args.vllm_importance_sampling_correction),
            is_mode=grpo_args.vllm_importance_sampling_mode,
            is_clip_max=grpo_args.vllm_importance_sampling_clip_max,
        )
        if refused:
            raise PluginError(f"plugin {name!r} (partial rollouts) cannot run with {refused}")

    def check_pool_sampler(self) -> None:
        """Refuse ``rlvr_pool_prompts`` from a plugin that is not the train sampler's, and, with the rollout pool on
        (``rlvr_select_groups``), a train sampler that does not implement it: the pool's extra rounds and the
        replacements of skipped prompts are drawn by the sampler's plugin."""
        sampler = self.winner("rlvr_train_sampler")
        drawers = self.implementers("rlvr_pool_prompts")
        if drawers and drawers != [sampler]:
            raise PluginValidationError(
                f"plugin {drawers[0]!r} implements rlvr_pool_prompts, which only the plugin that provides the train "
                f"sampler may answer; the sampler here is {sampler!r}'s"
            )
        policies = self.implementers("rlvr_select_groups")
        if policies and not drawers:
            raise PluginValidationError(
                f"plugin {policies[0]!r} runs the rollout pool, whose extra rounds draw their prompts from the train "
                f"sampler's plugin (rlvr_pool_prompts), but the sampler plugin {sampler!r} does not implement it; "
                "enable a sampler plugin that does (the default repeat-sampler does) or disable the pool plugin"
            )

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for p in self.enabled:
            options = _options_dict(p.instance.options)
            if p.weight_schedule is not None:
                options["weight"] = p.weight_schedule.as_config()
            out.append(
                {
                    "name": p.name,
                    "distribution": p.entry.distribution,
                    "version": p.entry.version,
                    "default": p.default,
                    "hooks": implemented_hooks(type(p.instance)),
                    "options": options,
                }
            )
        return out


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def print_trace(call: HookCall, file: Any = None) -> None:
    """``RLVR_TRACE_PLUGINS=1``: one block per hook call on stderr (hook, plugin, milliseconds,
    arguments and result; tensors as shapes, long values cut)."""
    lines = [f"rlvr trace: {call.hook} [{call.plugin}] {call.ms:.2f} ms"]
    lines += [f"    {key} = {_short(value)}" for key, value in call.kwargs.items()]
    lines.append(
        f"    -> {type(call.error).__name__}: {call.error}"
        if call.error is not None
        else f"    -> {_short(call.result)}"
    )
    print("\n".join(lines), file=file or sys.stderr, flush=True)


def _short(value: Any, limit: int = 200) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return f"{type(value).__name__}(shape={tuple(shape)}, dtype={value.dtype})"
    if isinstance(value, (list, tuple)) and any(hasattr(v, "shape") for v in value):
        return "[" + ", ".join(_short(v, 60) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _options_dict(opts: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(opts) if dataclasses.is_dataclass(opts) and not isinstance(opts, type) else {}


WEIGHTED_HOOKS = ("rlvr_reward_functions", "rlvr_length_penalty")


def weight_schedulable(cls: type[Plugin]) -> bool:
    """Whether ``cls``'s ``weight`` option may be a schedule: it has one and implements a weighted hook."""
    return bool(set(WEIGHTED_HOOKS) & set(implemented_hooks(cls))) and "weight" in fields.hints(cls.Options)


def plugin_options(cls: type[Plugin]) -> list[str]:
    """:func:`~rlvr_plugins.plugin.describe_options` of ``cls``, its ``weight`` shown with the schedules it
    may be instead (``rlvr plugins``, and the valid options an option error lists)."""
    described = describe_options(cls.Options)
    if not weight_schedulable(cls):
        return described
    return [f"{d[:-1]}; or a schedule: {SCHEDULE_NOTE})" if d.startswith("weight (") else d for d in described]


def split_weight_schedule(name: str, cls: type[Plugin], raw: Any) -> tuple[Any, WeightSchedule | None]:
    """``(options without the schedule, schedule)`` when ``raw["weight"]`` is a mapping, else ``(raw, None)``.

    The plugin's ``weight`` option then parses as 1.0 and the schedule gives the whole weight. A
    schedule on a plugin that contributes no reward and no length penalty, or has no ``weight``
    option, or a malformed schedule, is a :class:`PluginOptionError` naming the plugin and ``weight``.
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("weight"), Mapping):
        return raw, None
    valid = plugin_options(cls)
    if not weight_schedulable(cls):
        raise PluginOptionError(
            name,
            [
                "option 'weight' is a schedule, but this plugin contributes no weighted reward or length penalty "
                "(a schedule applies to a plugin implementing rlvr_reward_functions or rlvr_length_penalty with "
                "a 'weight' option)"
            ],
            valid,
            ["weight"],
        )
    try:
        schedule = parse_schedule(raw["weight"])
    except ValueError as exc:
        raise PluginOptionError(name, [f"option 'weight' (a schedule): {exc}"], valid, ["weight"]) from None
    for value in dict.fromkeys(schedule.extremes()):  # the plugin's own rule for its weight holds at every step
        try:
            cls.parse_options({**raw, "weight": value})
        except PluginOptionError as exc:
            if "weight" in exc.keys or any("'weight'" in p for p in exc.problems):
                problems = "; ".join(exc.problems)
                raise PluginOptionError(
                    name, [f"option 'weight' (a schedule) reaches {value:g}, where: {problems}"], valid, ["weight"]
                ) from None
    return {**raw, "weight": 1.0}, schedule


def check_plugins_config(
    plugins_config: Mapping[str, Any] | None,
    available: Mapping[str, Any] | None = None,
    where: Callable[[str], str] | None = None,
) -> list[tuple[str, type, Any]]:
    """``(name, class, parsed options)`` of each plugin the config's ``plugins:`` names, no
    instance made: a name that is not installed, a plugin that cannot be imported, an unknown or
    ill-typed option or a misnamed hook is an error naming it. Imports only the named plugins'
    modules, so a command can run it before torch (the unknown names before any import). A ``weight``
    schedule is checked too (:func:`split_weight_schedule`).
    ``where(dotted key)``: ``"file:line: "`` of a key of the config file, put before an option's error."""
    return [(name, cls, options) for name, cls, options, _ in _checked_plugins(plugins_config, available, where)]


def _checked_plugins(
    plugins_config: Mapping[str, Any] | None,
    available: Mapping[str, Any] | None = None,
    where: Callable[[str], str] | None = None,
) -> list[tuple[str, type, Any, WeightSchedule | None]]:
    """:func:`check_plugins_config` with each plugin's weight schedule (None: a plain number)."""
    if plugins_config is not None and not isinstance(plugins_config, Mapping):
        raise PluginError(plugins_mapping_problem(plugins_config))
    available = discover() if available is None else available
    plugins_config = dict(plugins_config or {})
    unknown = [n for n in plugins_config if n not in available]
    if unknown:
        raise UnknownPluginError(unknown, list(available))
    problems: list[PluginError] = []
    checked: list[tuple[str, type, Any, WeightSchedule | None]] = []
    for name, raw in plugins_config.items():
        try:
            cls = available[name].load()
            _check_hook_names(name, cls)
            raw, schedule = split_weight_schedule(name, cls, raw)
            checked.append((name, cls, cls.parse_options(raw), schedule))
        except PluginOptionError as exc:
            problems.append(exc.located(where) if where is not None else exc)
        except PluginError as exc:
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigError([str(p) for p in problems], source="plugins")
    return checked


def plugins_mapping_problem(value: Any) -> str:
    """The message for a ``plugins`` argument that is not a mapping (a list of names, a string).

    >>> plugins_mapping_problem(["r1-accuracy"])
    "plugins must be a mapping {plugin name: options}, got list ['r1-accuracy']; pass {'r1-accuracy': {}}"
    """
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, set)) else None
    hint = ""
    if names is not None and len(names) <= 5 and all(isinstance(n, str) and len(n) <= 100 for n in names):
        hint = "; pass {" + ", ".join(f"{n!r}: {{}}" for n in names) + "}"
    return f"plugins must be a mapping {{plugin name: options}}, got {type(value).__name__} {shown(value)}{hint}"


def build_plugin_set(plugins_config: Mapping[str, Any] | None) -> PluginSet:
    """Enable and configure the plugins named in the config's ``plugins:`` section.

    Fails before any model is loaded, naming the culprit, when: a name is not installed;
    a plugin cannot be imported; an option is unknown or ill-typed; a method looks like a
    hook but matches no spec; two enabled plugins implement a one-winner hook. Missing
    one-winner hooks are answered by the built-in defaults.
    """
    available = discover()
    enabled = [
        EnabledPlugin(name, cls(options), available[name], weight_schedule=schedule)
        for name, cls, options, schedule in _checked_plugins(plugins_config, available)
    ]
    for hook in hookspecs.ONE_WINNER_HOOKS:
        answering = [p.name for p in enabled if hook in implemented_hooks(type(p.instance))]
        if len(answering) > 1 and hook not in hookspecs.ABSTAINING_HOOKS:
            raise PluginConflictError(hook, answering)
        if not answering and hook in DEFAULTS:
            entry = available[DEFAULTS[hook]]
            cls = entry.load()
            enabled.append(EnabledPlugin(entry.name, cls(cls.Options()), entry, default=True))
    return PluginSet(enabled)


def register_plugin_commands(subparsers: Any) -> list[str]:
    """Let every installed plugin add its ``rlvr`` commands (``rlvr_register_commands``), in name
    order, each built with its default options; return the plugins that did. A command name that
    is already taken is an error naming the plugin. Imports every installed plugin (not the built-ins,
    which add none): the CLI calls this only when the command line does not name a built-in command."""
    import argparse

    enabled = []
    for name, entry in sorted(discover().items()):
        if name in BUILTIN_PLUGINS and entry.distribution == "rlvr-plugins":
            continue
        cls = entry.load()
        if "rlvr_register_commands" in implemented_hooks(cls):
            _check_hook_names(name, cls)
            enabled.append(EnabledPlugin(name, cls(cls.parse_options({})), entry))
    plugin_set = PluginSet(enabled)
    done = []
    for name in plugin_set.implementers("rlvr_register_commands"):
        try:
            plugin_set.call("rlvr_register_commands", only=[name], subparsers=subparsers)
        except argparse.ArgumentError as exc:
            raise PluginValidationError(f"plugin {name!r}: rlvr_register_commands: {exc}") from exc
        done.append(name)
    return done


def list_plugins(enabled_names: set[str] | None = None) -> list[dict[str, Any]]:
    """Everything installed, for ``rlvr plugins``: name, version, distribution, hooks, options."""
    rows = []
    for name, entry in sorted(discover().items()):
        row: dict[str, Any] = {"name": name, "distribution": entry.distribution, "version": entry.version}
        try:
            cls = entry.load()
            _check_hook_names(name, cls)
            row["hooks"] = implemented_hooks(cls)
            row["options"] = plugin_options(cls)
            row["description"] = cls.description
            if not row["hooks"]:
                row["warning"] = (
                    f"{cls.__qualname__} implements no hook (no method named rlvr_… decorated with "
                    "@rlvr_plugins.hookimpl): enabled, it would do nothing"
                )
        except PluginError as exc:
            row["error"] = str(exc)
        if enabled_names is not None:
            row["enabled"] = name in enabled_names
        rows.append(row)
    return rows
