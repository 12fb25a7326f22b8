"""The default sampler: TRL's ``RepeatSampler``, unchanged; the rollout pool's extra rounds draw uniformly."""

from __future__ import annotations

from .. import hookimpl
from ..plugin import Plugin


class RepeatSamplerPlugin(Plugin):
    """Uniform shuffled order, each prompt repeated ``num_generations`` times (TRL's behaviour)."""

    name = "repeat-sampler"
    description = "TRL's RepeatSampler: uniform shuffled prompts; the default sampler"

    @hookimpl
    def rlvr_train_sampler(self, dataset, num_generations, prompts_per_batch, repeat_count, shuffle, seed):
        from trl.trainer.utils import RepeatSampler  # lazily: listing plugins must not import TRL

        return RepeatSampler(
            data_source=dataset,
            mini_repeat_count=num_generations,
            batch_size=prompts_per_batch,
            repeat_count=repeat_count,
            shuffle=shuffle,
            seed=seed,
        )

    @hookimpl
    def rlvr_pool_prompts(self, num_prompts, step, round, seed):
        from ..rollout_pool import extra_prompts

        return extra_prompts(seed, step, round, num_prompts, num_prompts)
