"""Built-in length shaping: ``dapo-overlong`` (DAPO's soft overlong punishment)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import hookimpl
from ..errors import ConfigError
from ..plugin import Plugin


class DAPOOverlong(Plugin):
    """DAPO's soft overlong punishment (Yu et al. 2025, §3.4, Eq. 13) as a length penalty.

    ``weight · R(|y|)`` with ``R = 0`` up to ``L_max − L_cache`` tokens, then linear down to
    ``−1`` at ``L_max`` (and ``−1`` beyond); formula in
    :func:`rlvr_plugins.advantages.overlong_penalty`. ``max_length`` (``L_max``) defaults to the
    run's ``max_completion_length``, ``cache`` (``L_cache``) to a fifth of it (DAPO: 4096 of
    20480). Like every length penalty it is added after the estimator, group-centred, never
    divided by a std.

    With TRL's ``mask_truncated_completions=True`` a completion cut at ``max_completion_length``
    takes no part in the loss, so its ``−1`` never pushes it down; it still lowers its group's
    mean penalty, which raises the shaping advantage of the group's other completions. With
    the default ``False`` (DAPO's setting) the truncated completion is pushed down by ``−1``
    relative to its group.
    """

    name = "dapo-overlong"
    description = "DAPO soft overlong punishment: 0 below L_max - L_cache, linear to -1 at L_max"

    @dataclass
    class Options:
        max_length: int | None = None
        cache: int | None = None
        weight: float = 1.0

        def __post_init__(self):
            if self.max_length is not None and self.max_length < 1:
                raise ValueError(f"option 'max_length' must be >= 1, got {self.max_length!r}")
            if self.cache is not None and self.cache < 1:
                raise ValueError(f"option 'cache' must be >= 1, got {self.cache!r}")
            if self.max_length is not None and self.cache is not None and self.cache > self.max_length:
                raise ValueError(f"option 'cache' ({self.cache}) must not exceed 'max_length' ({self.max_length})")
            if not math.isfinite(self.weight) or self.weight < 0:
                raise ValueError(f"option 'weight' must be a finite number >= 0, got {self.weight!r}")

    def __init__(self, options=None):
        super().__init__(options)
        self._run_max_length: int | None = None

    def limits(self) -> tuple[int, int]:
        """``(L_max, L_cache)``: the options, else the run's ``max_completion_length`` and a fifth of it."""
        max_length = self.options.max_length or self._run_max_length
        if max_length is None:
            raise ConfigError(
                f"plugin {self.name!r}: option 'max_length' is not set and the run's max_completion_length "
                "is unknown; set max_length",
                source="plugins",
            )
        cache = self.options.cache or max(1, max_length // 5)
        if cache > max_length:
            raise ConfigError(
                f"plugin {self.name!r}: option cache={cache} exceeds L_max={max_length}; set cache <= {max_length}",
                source="plugins",
            )
        return max_length, cache

    @hookimpl
    def rlvr_validate_run(self, grpo_args):
        run_max = getattr(grpo_args, "max_completion_length", None)
        self._run_max_length = run_max if isinstance(run_max, int) else None
        max_length, _ = self.limits()
        if self._run_max_length is not None and max_length > self._run_max_length:
            raise ConfigError(
                f"plugin {self.name!r}: option max_length={max_length} exceeds trainer.max_completion_length="
                f"{self._run_max_length}, so no completion reaches the penalty's end; set max_length <= "
                f"{self._run_max_length}",
                source="plugins",
            )

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        from ..advantages import overlong_penalty  # torch: when the hook runs

        max_length, cache = self.limits()
        return self.options.weight * overlong_penalty(completion_lengths, max_length, cache)
