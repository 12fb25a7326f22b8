"""The ``kimi-curriculum`` sampler: TRL's ``RepeatSampler`` contract, prompts drawn by curriculum and priority.

Every chunk of ``prompts_per_batch`` distinct prompts is drawn lazily, when the
dataloader first asks for it, from a random generator seeded by ``(seed, chunk number)``
and the statistics known at that moment. Drawn chunks are recorded (``pending``) until
their rewards arrive through ``rlvr_on_rewards``; the record is part of the checkpoint, so
a resumed run replays the chunks the dataloader had already prefetched and draws every
later chunk from the same statistics as the uninterrupted run.

With the rollout pool on, the pool's extra rounds (and the replacements of prompts skipped
before generating) take their prompts from :meth:`CurriculumSampler.pool_order`, drawn from the
same statistics by a generator seeded by ``(seed, step, round)``. The pool names the groups each
round starts (``rlvr_pool_started``, :meth:`CurriculumSampler.start`): round 0 consumes the chunk the
dataloader yielded, and every started group is *in flight* until its rewards arrive, at the round
that started it or, with partial rollouts, at a later round or step; it is counted then
(:meth:`CurriculumSampler.observe`). The groups in flight are part of the checkpoint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import Sampler

from .curriculum import admitted, admitted_difficulty, sampling_weights, success_histogram, success_rates

if TYPE_CHECKING:
    from .plugins import KimiCurriculum

STATE_VERSION = 1


def schedule_kwargs(rules: KimiCurriculum.Options) -> dict[str, Any]:
    """The options of :func:`~rlvr_kimi.curriculum.admitted` among the plugin's options."""
    return {
        "schedule": rules.schedule,
        "start_quantile": rules.start_quantile,
        "full_at_step": rules.full_at_step,
        "num_stages": rules.num_stages,
    }


@dataclass
class CurriculumState:
    """Everything the sampler's future depends on, identical on every process.

    * ``successes`` / ``attempts``: per prompt (dataset position), counts from every
      scored batch so far.
    * ``blocked_until``: a prompt is not drawn for chunk numbers ``< blocked_until[i]``
      (zero-variance skipping).
    * ``observed``: chunks whose rewards have been counted (chunk ``observed`` is next).
    * ``drawn``: chunks drawn so far (the next new chunk has this number); the "RNG
      state" is ``(seed, drawn)``, since chunk ``c`` is drawn from a generator seeded by
      ``(seed, c)``.
    * ``pending``: chunk number → prompt ids, drawn but not yet counted (the prefetch).
    * ``last_observed``: the ids of chunk ``observed - 1`` (for a resume inside it).
    * ``in_flight``: with the rollout pool, the prompts of the groups started and not yet counted
      (a multiset: one entry per group); ``uncounted``: those of them started again for a chunk
      already counted (a resume inside it), whose rewards are not counted twice.
    * ``metrics_due``: the chunk consumed by the pool whose metrics the next counted groups log.

    Not saved: ``resumed`` (set by :meth:`from_dict`: the next epoch starts from
    ``observed``) and ``cursor`` (the first chunk of the next epoch in this process).
    """

    successes: list[int]
    attempts: list[int]
    blocked_until: list[int]
    observed: int = 0
    drawn: int = 0
    pending: dict[int, list[int]] = field(default_factory=dict)
    last_observed: list[int] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    uncounted: list[int] = field(default_factory=list)
    metrics_due: int | None = None
    seed: int | None = None
    resumed: bool = False
    cursor: int = 0

    @classmethod
    def fresh(cls, num_prompts: int) -> CurriculumState:
        return cls([0] * num_prompts, [0] * num_prompts, [0] * num_prompts)

    @property
    def num_prompts(self) -> int:
        return len(self.successes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "num_prompts": self.num_prompts,
            "seed": self.seed,
            "observed": self.observed,
            "drawn": self.drawn,
            "pending": {str(c): list(ids) for c, ids in sorted(self.pending.items())},
            "last_observed": list(self.last_observed),
            "in_flight": list(self.in_flight),
            "uncounted": list(self.uncounted),
            "metrics_due": self.metrics_due,
            "successes": list(self.successes),
            "attempts": list(self.attempts),
            "blocked_until": list(self.blocked_until),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], num_prompts: int) -> CurriculumState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"curriculum state version {data.get('version')!r} is not {STATE_VERSION}")
        if data["num_prompts"] != num_prompts:
            raise ValueError(
                f"the checkpoint's curriculum state covers {data['num_prompts']} prompts but the train "
                f"set has {num_prompts}; resume with the same data"
            )
        return cls(
            successes=[int(x) for x in data["successes"]],
            attempts=[int(x) for x in data["attempts"]],
            blocked_until=[int(x) for x in data["blocked_until"]],
            observed=int(data["observed"]),
            drawn=int(data["drawn"]),
            pending={int(c): [int(i) for i in ids] for c, ids in data["pending"].items()},
            last_observed=[int(i) for i in data["last_observed"]],
            in_flight=[int(i) for i in data.get("in_flight", [])],  # absent: saved before the pool kept them
            uncounted=[int(i) for i in data.get("uncounted", [])],
            metrics_due=data.get("metrics_due"),
            seed=data.get("seed"),
            resumed=True,
        )


def chunk_seed(seed: int, chunk: int | str) -> int:
    """The seed of chunk ``chunk``'s generator: a hash of ``(seed, chunk)``, in ``[0, 2**63)``."""
    digest = hashlib.sha256(f"rlvr-kimi-curriculum:{seed}:{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


class CurriculumSampler(Sampler[int]):
    """Yields dataset indices with TRL's ``RepeatSampler`` layout, chunks drawn by curriculum and priority.

    Layout: chunk ``c`` holds ``prompts_per_batch`` distinct prompts; each prompt is yielded
    ``num_generations`` times in a row, and the whole chunk ``repeat_count`` times in a row.
    One pass (an "epoch") is ``len(dataset) // prompts_per_batch`` chunks, as with
    ``RepeatSampler``, so ``num_train_epochs`` means the same number of steps.

    :param difficulties: ``(n,)`` float, or None when the curriculum is off.
    :param rules: the plugin's options (schedule, floor, priors, zero-variance skipping).
    :param state: the shared :class:`CurriculumState` (the plugin updates it from rewards).
    :param gradient_accumulation_steps: to place chunk ``c`` at optimizer step
        ``t(c) = c * repeat_count // gradient_accumulation_steps`` on the schedule.
    :param ignore_data_skip: the Trainer's setting: whether a resumed run re-iterates the
        batches it already trained on (False, the default) or starts afresh (True).
    """

    def __init__(
        self,
        *,
        num_prompts: int,
        difficulties: torch.Tensor | None,
        state: CurriculumState,
        rules: KimiCurriculum.Options,
        num_generations: int,
        prompts_per_batch: int,
        repeat_count: int,
        seed: int,
        gradient_accumulation_steps: int = 1,
        ignore_data_skip: bool = False,
    ):
        if num_prompts < prompts_per_batch:
            raise ValueError(
                f"the train set has {num_prompts} prompts; a batch needs {prompts_per_batch} distinct "
                "prompts (generation_batch_size / num_generations)"
            )
        if state.num_prompts != num_prompts:
            raise ValueError(f"curriculum state covers {state.num_prompts} prompts, the train set has {num_prompts}")
        sizes = {len(ids) for ids in [*state.pending.values(), *([state.last_observed] if state.last_observed else [])]}
        if sizes - {prompts_per_batch}:
            raise ValueError(
                f"the saved chunks hold {sorted(sizes)} prompts but a batch now needs "
                f"{prompts_per_batch}; resume with the same batch settings "
                "(per_device_train_batch_size, num_generations, steps_per_generation, "
                "number of processes)"
            )
        self.num_prompts = num_prompts
        self.difficulties = None if difficulties is None else difficulties.to(torch.float64)
        self.state = state
        self.rules = rules
        self.num_generations = num_generations
        self.prompts_per_batch = prompts_per_batch
        self.repeat_count = repeat_count
        self.seed = int(seed)
        self.gradient_accumulation_steps = max(1, int(gradient_accumulation_steps))
        self.ignore_data_skip = ignore_data_skip
        self.chunks_per_epoch = num_prompts // prompts_per_batch
        state.seed = self.seed
        self.offered: dict[int, set[int]] = {}  # round -> the prompts pool_order offered it (not saved: see start)
        self.tracking = False  # the rollout pool names the groups it starts (start): observe counts groups in flight
        self.repeated = 0  # groups of the last observe not counted: a chunk generated again after a resume inside it

    def __len__(self) -> int:
        return self.chunks_per_epoch * self.prompts_per_batch * self.num_generations * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        state = self.state
        if state.resumed:
            # The Trainer skips the batches of the resumed epoch it already trained on
            # (skip_first_batches) unless ignore_data_skip, in which case it starts afresh.
            start = (
                state.observed
                if self.ignore_data_skip
                else (state.observed // self.chunks_per_epoch) * self.chunks_per_epoch
            )
            state.resumed = False
        else:
            start = state.cursor
        state.cursor = start + self.chunks_per_epoch
        for c in range(start, start + self.chunks_per_epoch):
            ids = self.chunk(c)
            for _ in range(self.repeat_count):
                for i in ids:
                    for _ in range(self.num_generations):
                        yield i

    # -- drawing ------------------------------------------------------------------------
    def chunk_step(self, c: int) -> int:
        """The optimizer step at which chunk ``c`` is first trained on (its place on the schedule)."""
        return c * self.repeat_count // self.gradient_accumulation_steps

    def chunk(self, c: int) -> list[int]:
        """The prompt ids of chunk ``c``: replayed when already drawn, otherwise drawn now and recorded."""
        state = self.state
        if c in state.pending:
            return state.pending[c]
        if c < state.observed:
            # Only reached for batches the Trainer skips on resume; chunk observed - 1 may be
            # partly trained on after a resume inside it, so it is replayed exactly.
            if c == state.observed - 1 and state.last_observed:
                return state.last_observed
            return list(range(self.prompts_per_batch))
        ids = self.draw(c)
        state.pending[c] = ids
        state.drawn = max(state.drawn, c + 1)
        return ids

    def admitted_pool(self, c: int) -> torch.Tensor:
        """``(m,)`` long: the prompts the curriculum admits for chunk ``c`` (all when it is off)."""
        if self.difficulties is None or self.rules.schedule == "none":
            return torch.arange(self.num_prompts)
        return admitted(
            self.difficulties, self.chunk_step(c), min_count=self.prompts_per_batch, **schedule_kwargs(self.rules)
        )

    def draw(self, c: int) -> list[int]:
        """Draw chunk ``c`` from the current statistics: a pure function of ``(seed, c, state)``.

        Among the admitted prompts not blocked for chunk ``c`` (blocked ones come back,
        soonest-unblocked first, when fewer than ``prompts_per_batch`` remain),
        ``prompts_per_batch`` distinct prompts are drawn without replacement with
        probability proportional to :func:`rlvr_kimi.curriculum.sampling_weights`.
        """
        eligible, rest = self.eligible(c)
        missing = max(0, self.prompts_per_batch - eligible.numel())
        eligible = torch.cat([eligible, torch.tensor(rest[:missing], dtype=torch.long)])
        picked = self.weighted(eligible, self.prompts_per_batch, chunk_seed(self.seed, c))
        return eligible[picked].tolist()

    def eligible(self, c: int) -> tuple[torch.Tensor, list[int]]:
        """The admitted prompts not blocked for chunk ``c`` (``(m,)`` long), and the blocked ones, soonest-unblocked
        first."""
        pool = self.admitted_pool(c)
        blocked_until = torch.tensor(self.state.blocked_until, dtype=torch.long)[pool]
        blocked = blocked_until > c
        rest = [i for _, i in sorted(zip(blocked_until[blocked].tolist(), pool[blocked].tolist()))]
        return pool[~blocked], rest

    def weighted(self, prompts: torch.Tensor, count: int, seed: int) -> torch.Tensor:
        """``count`` positions into ``prompts`` drawn without replacement ``∝`` their sampling weights."""
        r = self.rules
        weights = sampling_weights(
            torch.tensor(self.state.successes)[prompts],
            torch.tensor(self.state.attempts)[prompts],
            floor=r.floor,
            prior_success=r.prior_success,
            prior_strength=r.prior_strength,
        )
        generator = torch.Generator().manual_seed(seed)
        return torch.multinomial(weights, count, replacement=False, generator=generator)

    def pool_order(self, step: int, round: int) -> list[int]:
        """The rollout pool's order of prompts for generation round ``round`` of optimizer step ``step``
        (``rlvr_pool_prompts``): the prompts eligible for the chunk being generated (chunk ``observed`` at
        round 0, whose prompts are not counted yet; ``observed - 1`` later) in a weighted random order, each
        next prompt drawn ``∝ max(1 - s_i, floor)`` among those left (as :meth:`draw`), from a generator
        seeded by ``(seed, step, round)``; then the blocked ones, soonest-unblocked first. A pure function of
        ``(seed, step, round, state)``, so every process and a resumed run draw the same order.
        """
        eligible, rest = self.eligible(max(0, self.state.observed - (round > 0)))
        seed = chunk_seed(self.seed, f"pool:{step}:{round}")
        order = (eligible[self.weighted(eligible, eligible.numel(), seed)].tolist() if eligible.numel() else []) + rest
        self.offered[round] = set(order)
        return order

    # -- statistics -----------------------------------------------------------------------
    def start(self, ids: list[int], round: int, drawn: list[int] | None = None) -> None:
        """The rollout pool starts a group on each of prompts ``ids`` in generation round ``round``
        (``rlvr_pool_started``): they are in flight until :meth:`observe` counts them.

        Round 0 is told the whole batch the dataloader yielded (``drawn``; default: ``ids``). When it is
        chunk ``observed`` (in any order), that chunk is consumed and ``ids`` start, which may be fewer
        (partial rollouts continue groups in the first places) and may hold prompts :meth:`pool_order`
        offered for round 0 in place of some (skipped before generating). When it is the chunk counted
        last, the batch is a regeneration after a resume inside it: its groups are in flight but will
        not be counted again. A round ``>= 1`` starts prompts :meth:`pool_order` offered it.

        :raises ValueError: when ``drawn`` is neither chunk, or the prompts are not the batch's or the offer's.
        """
        state = self.state
        self.tracking = True
        offered = self.offered.get(round, set()) if round else self.offered.pop(0, set())
        if round:
            if not set(ids) <= offered:
                raise ValueError(
                    f"the rollout pool's round {round} starts prompts {sorted(set(ids) - offered)} that this "
                    "sampler did not offer it (rlvr_pool_prompts)"
                )
            state.in_flight.extend(ids)
            return
        k, batch = state.observed, list(drawn or ids)
        expected = state.pending.get(k)
        repeat = expected is None or sorted(batch) != sorted(expected)
        if repeat and not (state.last_observed and sorted(batch) == sorted(state.last_observed)):
            raise ValueError(
                f"the rollout pool's batch holds prompts {sorted(batch)}, but the next chunk this sampler drew "
                f"(#{k}) holds {None if expected is None else sorted(expected)}"
            )
        if not set(ids) <= set(batch) | offered:
            raise ValueError(
                f"the rollout pool starts prompts {sorted(set(ids) - set(batch) - offered)}, which are neither in "
                "the batch this sampler drew nor offered for round 0 (rlvr_pool_prompts)"
            )
        if repeat:
            state.uncounted.extend(ids)
            return
        del state.pending[k]
        state.observed, state.last_observed, state.metrics_due = k + 1, list(expected), k
        state.in_flight.extend(ids)

    def observe(
        self, ids: list[int], successes: list[int], attempts: list[int], zero_variance: list[bool], round: int = 0
    ) -> dict[str, float] | None:
        """Count scored groups (of prompts ``ids``); return the metrics to log, if any.

        With the rollout pool (:meth:`start` was called), the groups must be in flight: each is counted
        once, whenever it finishes; the metrics of the chunk the pool consumed last are returned with the
        first groups counted after it. Without the pool, the groups are one chunk, the next not yet
        counted (chunk ``observed``), in any group order; a batch with the prompts of the chunk counted
        last is a regeneration after a resume inside it: not counted again (``repeated``), ``None``.

        :raises ValueError: when the prompts are not in flight, or not those of the next chunk.
        """
        state = self.state
        self.repeated = 0
        if self.tracking or state.in_flight or state.uncounted:  # the pool's groups (restored ones too)
            keep = []
            for n, i in enumerate(ids):
                if i in state.in_flight:
                    state.in_flight.remove(i)
                    keep.append(n)
                elif i in state.uncounted:
                    state.uncounted.remove(i)
                    self.repeated += 1
                else:
                    raise ValueError(
                        f"the scored groups hold prompt {i}, which the rollout pool did not start "
                        f"(round {round}; in flight: {sorted(state.in_flight)[:8]})"
                    )
            pick = [[values[n] for n in keep] for values in (ids, successes, attempts, zero_variance)]
            self.count(*pick)
            due, state.metrics_due = state.metrics_due, None
            return None if due is None else self.metrics(due, pick[3])
        k = state.observed
        expected = state.pending.get(k)
        if expected is None or len(ids) != len(expected) or not set(ids) <= set(expected):
            if state.last_observed and sorted(ids) == sorted(state.last_observed):
                self.repeated = len(ids)
                return None
            raise ValueError(
                f"the scored batch holds prompts {sorted(ids)}, but the next chunk this sampler drew "
                f"(#{k}) holds {None if expected is None else sorted(expected)}"
            )
        self.count(ids, successes, attempts, zero_variance)
        del state.pending[k]
        state.observed = k + 1
        state.last_observed = list(expected)
        return self.metrics(k, zero_variance)

    def count(self, ids: list[int], successes: list[int], attempts: list[int], zero_variance: list[bool]) -> None:
        """Add the groups of prompts ``ids`` to the success record; block the zero-variance ones."""
        state, block = self.state, self.rules.skip_zero_variance_steps
        for i, s, a, z in zip(ids, successes, attempts, zero_variance, strict=True):
            state.successes[i] += int(s)
            state.attempts[i] += int(a)
            if z and block > 0:
                state.blocked_until[i] = max(state.blocked_until[i], state.drawn + block)

    def metrics(self, k: int, zero_variance: list[bool]) -> dict[str, float]:
        state, r = self.state, self.rules
        pool = self.admitted_pool(k)
        attempts = torch.tensor(state.attempts)
        seen = attempts > 0
        rates = success_rates(
            torch.tensor(state.successes)[seen],
            attempts[seen],
            prior_success=r.prior_success,
            prior_strength=r.prior_strength,
        )
        out = {
            "admitted_prompts": float(pool.numel()),
            "prompts_seen": float(seen.sum()),
            "zero_variance_share": sum(map(bool, zero_variance)) / max(1, len(zero_variance)),
            "draw_lead": float(state.drawn - 1 - k),
        }
        if self.difficulties is not None and r.schedule != "none":
            out["admitted_difficulty"] = admitted_difficulty(
                self.difficulties, self.chunk_step(k), min_count=self.prompts_per_batch, **schedule_kwargs(r)
            )
        if r.skip_zero_variance_steps > 0:
            out["blocked_prompts"] = float(sum(b > state.drawn for b in state.blocked_until))
        out.update({f"success_hist/{name}": share for name, share in success_histogram(rates).items()})
        return out
