"""The ``kimi-curriculum`` sampler and plugin without a trainer: contract, ranks, distribution, state, errors."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset

from rlvr_kimi.plugins import KimiCurriculum
from rlvr_kimi.sampler import CurriculumSampler, CurriculumState
from rlvr_plugins.errors import ConfigError, PluginContractError, PluginError, PluginOptionError

G = 2


def dataset(n=12, difficulty=None, **columns):
    rows = {
        "prompt": [f"p{i}" for i in range(n)],
        "rlvr_index": list(range(n)),
        "difficulty": difficulty if difficulty is not None else [i % 4 for i in range(n)],
        **columns,
    }
    return Dataset.from_dict(rows)


def plugin(**options):
    return KimiCurriculum(KimiCurriculum.parse_options({"correctness_reward": "acc", **options}))


def make_sampler(p, ds=None, ppb=3, repeat=2, seed=11, ignore_data_skip=False):
    grpo_args = SimpleNamespace(gradient_accumulation_steps=1, ignore_data_skip=ignore_data_skip)
    return p.rlvr_train_sampler(
        dataset=ds if ds is not None else dataset(),
        num_generations=G,
        prompts_per_batch=ppb,
        repeat_count=repeat,
        shuffle=True,
        seed=seed,
        grpo_args=grpo_args,
    )


def feed(p, ids, correct_of, round=0):
    """Call ``rlvr_on_rewards`` for one chunk (or rollout-pool ``round``); completion j of prompt i is correct
    when ``correct_of(i, j)``."""
    example_indices = [i for i in ids for _ in range(G)]
    acc = torch.tensor([float(correct_of(i, j)) for i in ids for j in range(G)])
    logged = {}
    p.rlvr_on_rewards(
        example_indices=example_indices,
        rewards=acc.clone(),
        rewards_per_func=acc.view(-1, 1),
        reward_names=["acc"],
        valid=torch.ones_like(acc, dtype=torch.bool),
        num_generations=G,
        log_metric=lambda k, v: logged.__setitem__(k, v),
        round=round,
    )
    return logged


def run_pipeline(p, sampler, chunks, correct_of, skip=0, lead=1):
    """Emulate the Trainer's loop: within an epoch the dataloader has drawn ``lead`` chunks beyond the one
    whose rewards arrive (1 by default, more with dataloader workers), a new epoch starts after the last
    chunk is scored, and a resumed run first skips the ``skip`` chunks it already trained on."""
    block = sampler.prompts_per_batch * G * sampler.repeat_count
    done = 0
    while done < chunks:
        it = iter(sampler)
        blocks = iter(lambda: list(itertools.islice(it, block)), [])  # noqa: B023 - used up in this iteration
        for _ in range(skip):
            next(blocks)
        skip = 0
        ahead = list(itertools.islice(blocks, lead + 1))
        while ahead and done < chunks:
            current = ahead.pop(0)
            feed(p, current[: sampler.prompts_per_batch * G : G], correct_of)
            yield current
            done += 1
            if done < chunks:  # the next batch is requested: the dataloader draws one more
                ahead.extend(itertools.islice(blocks, 1))


def test_layout_repeats_each_prompt_then_each_chunk_like_repeat_sampler():
    p = plugin(schedule="none")
    sampler = make_sampler(p, ppb=3, repeat=2)
    assert len(sampler) == (12 // 3) * 3 * G * 2
    out = list(itertools.islice(iter(sampler), 3 * G * 2))
    ids = out[::G][:3]
    assert len(set(ids)) == 3
    assert out == [i for i in ids for _ in range(G)] * 2


def test_one_epoch_has_len_indices_and_every_chunk_is_distinct_prompts():
    p = plugin(schedule="none")
    sampler = make_sampler(p, ppb=3, repeat=1)
    block = 3 * G
    blocks = list(run_pipeline(p, sampler, 4, lambda i, j: j == 0))
    assert sum(map(len, blocks)) == len(sampler)
    for b in blocks:
        assert len(set(b)) == 3 and all(b[k] == b[k + 1] for k in range(0, block, G))


def test_two_ranks_fed_the_same_rewards_draw_the_same_sequence():
    ranks = [plugin(start_quantile=0.5, full_at_step=3, skip_zero_variance_steps=2) for _ in range(2)]
    samplers = [make_sampler(p) for p in ranks]
    correct_of = lambda i, j: (i * 7 + j) % 3 == 0  # noqa: E731 (mixed and all-equal groups)
    sequences = [[x for b in run_pipeline(p, s, 9, correct_of) for x in b] for p, s in zip(ranks, samplers)]
    assert sequences[0] == sequences[1]
    assert ranks[0].rlvr_state_dict() == ranks[1].rlvr_state_dict()
    # and the statistics change the draws: a run with other rewards draws another sequence
    other = plugin(start_quantile=0.5, full_at_step=3, skip_zero_variance_steps=2)
    seq = [x for b in run_pipeline(other, make_sampler(other), 9, lambda i, j: i % 2 == 0) for x in b]
    block = 3 * G * 2
    # chunks 0 and 1 are drawn before any reward arrives (prefetch): they only know the prior
    assert seq[: 2 * block] == sequences[0][: 2 * block]
    assert seq != sequences[0]


def test_draws_follow_one_minus_success_with_the_floor():
    """Six prompts: s = 1 (x2), s = 0 (x2), never seen (x2, prior 0.5); weights 0.05, 1, 0.5."""
    n = 6
    state = CurriculumState.fresh(n)
    state.successes[:] = [50, 50, 0, 0, 0, 0]
    state.attempts[:] = [50, 50, 50, 50, 0, 0]
    rules = KimiCurriculum.Options(schedule="none", floor=0.05, prior_success=0.5, prior_strength=0.0)
    sampler = CurriculumSampler(
        num_prompts=n,
        difficulties=None,
        state=state,
        rules=rules,
        num_generations=G,
        prompts_per_batch=1,
        repeat_count=1,
        seed=3,
    )
    draws = 4000
    counts = torch.bincount(torch.tensor([sampler.draw(c)[0] for c in range(draws)]), minlength=n).double()
    weights = torch.tensor([0.05, 0.05, 1.0, 1.0, 0.5, 0.5], dtype=torch.float64)
    expected = draws * weights / weights.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.5, (counts.tolist(), expected.tolist())  # 5 degrees of freedom, p = 0.001
    solved, unsolved = counts[:2].sum(), counts[2:4].sum()
    assert 0.03 < float(solved / unsolved) < 0.07
    assert counts[2:4].min() > counts[4:].max() > counts[:2].max()


def test_curriculum_draws_only_admitted_prompts_until_full_at_step():
    difficulty = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    p = plugin(start_quantile=0.25, full_at_step=4, schedule="step", num_stages=2)
    sampler = make_sampler(p, dataset(difficulty=difficulty), ppb=3, repeat=1)
    # step schedule, K = 2, T = 4: q = 0.25 (t < 2), 0.625 (2 <= t < 4), 1 (t >= 4)
    admitted = {0: {0, 1, 2}, 1: {0, 1, 2}, 2: set(range(9)), 3: set(range(9))}
    for c, block in enumerate(run_pipeline(p, sampler, 8, lambda i, j: j == 0)):
        ids = set(block)
        assert ids <= admitted.get(c, set(range(12))), (c, ids)
    assert sampler.metrics(1, [False] * 3)["admitted_difficulty"] == 0.0
    late = sampler.metrics(7, [False] * 3)
    assert late["admitted_prompts"] == 12 and late["admitted_difficulty"] == 3.0


def test_zero_variance_prompts_are_skipped_for_the_next_draws_without_changing_the_batch_shape():
    p = plugin(schedule="none", skip_zero_variance_steps=3)
    sampler = make_sampler(p, dataset(n=12), ppb=2, repeat=1)
    it = iter(sampler)
    first = [next(it) for _ in range(2 * G)][::G]
    second = [next(it) for _ in range(2 * G)][::G]  # prefetched before the rewards of the first
    logged = feed(p, first, lambda i, j: True)  # both groups all-correct: zero variance
    assert logged["curriculum/zero_variance_share"] == 1.0 and logged["curriculum/blocked_prompts"] == 2
    later = [[next(it) for _ in range(2 * G)][::G] for _ in range(3)]
    assert not set(first) & set(x for chunk in later for x in chunk)
    assert sampler.state.blocked_until[first[0]] == 2 + 3  # chunks 2, 3, 4 (the next three drawn) skip it
    assert second and all(len(set(chunk)) == 2 for chunk in later)
    # when blocking leaves fewer than a batch of prompts, the soonest-unblocked come back
    p = plugin(schedule="none", skip_zero_variance_steps=5)
    sampler = make_sampler(p, dataset(n=3), ppb=2, repeat=1)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(2 * G)][::G]
    feed(p, chunk0, lambda i, j: True)
    assert next(it, None) is None  # 3 prompts, 2 per chunk: one chunk per epoch
    it = iter(sampler)
    chunk1 = [next(it) for _ in range(2 * G)][::G]
    assert len(set(chunk1)) == 2 and len(set(chunk1) & set(chunk0)) == 1


@pytest.mark.parametrize("lead, stop", [(1, 2), (3, 2), (1, 8), (2, 11)])
def test_state_round_trips_and_a_resumed_sampler_replays_prefetched_chunks(lead, stop):
    """Stop after ``stop`` chunks (inside epoch 0, at its end, inside epoch 1), resume, compare."""
    ds = dataset(n=24)  # 3 prompts per chunk: 8 chunks per epoch
    correct_of = lambda i, j: i % 2 == 0  # noqa: E731 (with no prior, one batch makes s_i 0 or 1)
    options = {"start_quantile": 0.5, "full_at_step": 5, "prior_strength": 0.0}
    p = plugin(**options)
    uninterrupted = list(run_pipeline(p, make_sampler(p, ds, ppb=3, repeat=1, seed=1), 20, correct_of, lead=lead))
    # a second run stops after `stop` chunks, when the dataloader has drawn up to `lead` more, and saves
    p1 = plugin(**options)
    list(run_pipeline(p1, make_sampler(p1, ds, ppb=3, repeat=1, seed=1), stop, correct_of, lead=lead))
    saved = p1.rlvr_state_dict()
    drawn = min(stop + lead, -(-stop // 8) * 8)  # the dataloader does not draw across an epoch's end
    assert saved["observed"] == stop and saved["drawn"] == drawn
    assert list(saved["pending"]) == [str(c) for c in range(stop, drawn)]
    p2 = plugin(**options)
    p2.rlvr_load_state_dict(state=saved)
    assert p2.rlvr_state_dict() == saved  # a checkpoint before the sampler is rebuilt keeps the state
    resumed = make_sampler(p2, ds, ppb=3, repeat=1, seed=1)
    if stop == 2:  # not vacuous: drawn now, from the newer statistics, some prefetched chunk would differ
        assert any(resumed.draw(int(c)) != ids for c, ids in saved["pending"].items())
    # the Trainer restarts the epoch of the checkpoint and skips the chunks of it already trained on
    resumed_blocks = list(run_pipeline(p2, resumed, 20 - stop, correct_of, skip=stop % 8, lead=lead))
    assert resumed_blocks == uninterrupted[stop:]
    assert p2.rlvr_state_dict() == p.rlvr_state_dict()


def test_resume_with_other_batch_settings_or_data_is_refused():
    p1 = plugin(schedule="none")
    list(run_pipeline(p1, make_sampler(p1), 2, lambda i, j: j == 0))
    p2 = plugin(schedule="none")
    p2.rlvr_load_state_dict(state=p1.rlvr_state_dict())
    with pytest.raises(PluginContractError, match=r"the saved chunks hold \[3\] prompts but a batch now needs 2"):
        make_sampler(p2, ppb=2)
    p2.rlvr_load_state_dict(state=p1.rlvr_state_dict())
    with pytest.raises(PluginContractError, match="covers 12 prompts but the train set has 10; resume with the same"):
        make_sampler(p2, dataset(n=10))


def test_resume_with_ignore_data_skip_starts_at_the_first_untrained_chunk():
    p1 = plugin(schedule="none")
    list(run_pipeline(p1, make_sampler(p1), 3, lambda i, j: j == 0))
    saved = p1.rlvr_state_dict()
    p2 = plugin(schedule="none")
    p2.rlvr_load_state_dict(state=saved)
    first = list(itertools.islice(iter(make_sampler(p2, ignore_data_skip=True)), 3 * G))
    assert first[::G] == saved["pending"]["3"]


def test_a_batch_from_another_sampler_is_a_contract_error_and_a_regenerated_chunk_is_not_counted_twice():
    p = plugin(schedule="none")
    sampler = make_sampler(p, ppb=2, repeat=1)
    it = iter(sampler)
    chunk0 = [next(it) for _ in range(2 * G)][::G]
    feed(p, list(reversed(chunk0)), lambda i, j: j == 0)  # whole groups in another order: fine
    before = p.rlvr_state_dict()
    assert feed(p, chunk0, lambda i, j: True) == {}  # the same prompts again: a regeneration, ignored
    assert p.rlvr_state_dict() == before
    _ = [next(it) for _ in range(2 * G)]
    wrong = [i for i in range(12) if i not in sampler.state.pending[1]][:2]
    with pytest.raises(PluginContractError, match=r"plugin 'kimi-curriculum': the scored batch holds prompts"):
        feed(p, wrong, lambda i, j: True)


def test_missing_difficulty_column_names_the_column_and_the_columns_present():
    p = plugin(difficulty_column="level")
    with pytest.raises(PluginError) as info:
        make_sampler(p)
    assert str(info.value).startswith(
        "plugin 'kimi-curriculum': the train set has no column 'level' "
        "(option difficulty_column) for the curriculum; columns present: "
        "['prompt', 'rlvr_index', 'difficulty']"
    )
    make_sampler(plugin(difficulty_column="level", schedule="none"))  # no curriculum: the column is not needed


def test_labels_and_pass_rates_set_the_difficulty():
    labelled = dataset(n=4, difficulty=["hard", "easy", "easy", "medium"])
    p = plugin(difficulty_labels={"easy": 0, "medium": 1, "hard": 2}, start_quantile=0.5, full_at_step=10)
    assert make_sampler(p, labelled, ppb=2).draw(0) in ([1, 2], [2, 1])
    with pytest.raises(PluginError, match="unknown label 'hard'"):
        make_sampler(plugin(difficulty_labels={"easy": 0, "medium": 1}), labelled, ppb=2)
    rates = dataset(n=4, pass_rate=[0.0, 1.0, 0.75, 0.5])
    p = plugin(difficulty_column="pass_rate", difficulty_from_pass_rate=True, start_quantile=0.5, full_at_step=10)
    assert sorted(make_sampler(p, rates, ppb=2).draw(0)) == [1, 2]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"floor": 0.0}, "option 'floor' must lie in (0, 1]"),
        ({"start_quantile": 0.0}, "option 'start_quantile' must lie in (0, 1]"),
        ({"schedule": "cosine"}, "option 'schedule' must be one of 'linear', 'step', 'none'"),
        ({"prior_success": 1.5}, "option 'prior_success' must lie in [0, 1]"),
        ({"skip_zero_variance_steps": -1}, "option 'skip_zero_variance_steps' must be >= 0"),
        ({"difficulty_labels": {"easy": "low"}}, "option 'difficulty_labels' must map labels to finite numbers"),
        ({"difficulty_labels": {"easy": 0}, "difficulty_from_pass_rate": True}, "exclude each other"),
        ({"flor": 0.1}, "unknown option 'flor' (did you mean 'floor'?)"),
    ],
)
def test_options_are_checked(options, message):
    with pytest.raises(PluginOptionError) as info:
        KimiCurriculum.parse_options(options)
    assert message in str(info.value) and "kimi-curriculum" in str(info.value)


def test_start_up_checks_name_the_plugin_and_the_option():
    with pytest.raises(
        ConfigError,
        match=r"correctness_reward='acc' is not a reward of this run. "
        r"Available rewards: \['r1-format'\]",
    ):
        plugin().rlvr_validate_run(reward_names=["r1-format"])
    with pytest.raises(ConfigError, match="trainer.remove_unused_columns=true would drop it"):
        plugin().rlvr_adjust_grpo_config(grpo_kwargs={}, trainer_section={"remove_unused_columns": True})
    with pytest.raises(PluginContractError, match="a batch needs 3 distinct prompts"):
        make_sampler(plugin(schedule="none"), dataset(n=2), ppb=3)


def test_kimi_sampler_reads_the_plugins_options():
    from rlvr_kimi.plugins import KimiCurriculum
    from rlvr_kimi.sampler import schedule_kwargs

    options = KimiCurriculum.Options(schedule="step", start_quantile=0.5, full_at_step=10, num_stages=2)
    assert schedule_kwargs(options) == {"schedule": "step", "start_quantile": 0.5, "full_at_step": 10, "num_stages": 2}
