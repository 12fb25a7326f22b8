"""``kimi-partial-rollouts``: the loss on stale segments (its gradient), and training runs with segments
(invariants with hypothesis, exact resume with unfinished trajectories waiting)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.rewards import Engines
from rlvr_plugins.rollout_pool import PooledGroup, StepCounts
from rlvr_plugins.segments import BEHAVIOUR, TOKEN_STEP
from rlvr_plugins.testing import digit_share, grpo_args, tiny_model, tiny_rows

G = 4
DIGITS = list(range(8, 18))  # the char tokenizer's '0'..'9'


def trainer_with(tmp_path, tokenizer, options, plugins=None, **args):
    from datasets import Dataset

    from rlvr_plugins.trainer import RLVRTrainer

    return RLVRTrainer(
        plugin_set=build_plugin_set({"digits": {}, "kimi-partial-rollouts": options, **(plugins or {})}),
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=grpo_args(tmp_path, **args),
        train_dataset=Dataset.from_list(tiny_rows()),
        processing_class=tokenizer,
    )


# -- the loss on stale tokens: its gradient against a computation by hand ----------------------------
def group(gid, steps, behaviour, rewards):
    rows = {
        "prompt_ids": [torch.tensor([5, 6, 7])] * G,
        "prompt_mask": [torch.ones(3, dtype=torch.long)] * G,
        "completion_ids": [torch.tensor(DIGITS[:4])] * G,
        "completion_mask": [torch.ones(4, dtype=torch.long)] * G,
        TOKEN_STEP: [torch.tensor(s) for s in steps],
        BEHAVIOUR: list(behaviour),
    }
    scores = {
        "rewards_per_func": torch.tensor(rewards).view(G, 1),
        "failed": torch.zeros(G, 1, dtype=torch.bool),
        "lengths": torch.full((G,), 4),
    }
    return PooledGroup(gid, gid, 1, True, tuple(rewards), rows, scores)


@pytest.mark.parametrize("mode", ["mask", "truncated-is"])
def test_a_stale_tokens_gradient_is_zero_under_mask_and_scaled_by_the_capped_ratio_under_truncated_is(
    tmp_path, tokenizer, digits_module, mode
):
    cap = 1.5
    trainer = trainer_with(tmp_path, tokenizer, {"segment_tokens": 2, "stale_segments": mode, "is_cap": cap})
    trainer.args.loss_type = trainer.loss_type = "grpo"
    trainer.state.global_step = 1
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    steps = [[[0, 0, 1, 1]] + [[1] * 4] * 3, [[0, 1, 1, 1], [1] * 4, [0, 0, 0, 1], [1] * 4]]
    generator = torch.Generator().manual_seed(0)
    behaviour = torch.randn(8, 4, generator=generator) * 0.5 - 1.0
    current = (torch.randn(8, 4, generator=generator) * 0.5 - 1.0).requires_grad_()
    chosen = [
        group(0, steps[0], behaviour[:4], [1.0, 0.0, 0.0, 0.0]),
        group(1, steps[1], behaviour[4:], [0.0, 1.0, 1.0, 0.0]),
    ]

    def logps(*args, **kwargs):  # the policy's per-token log-probs: `current`, a leaf we differentiate by
        return (current if torch.is_grad_enabled() else current.detach()), torch.zeros_like(current), None

    trainer._get_per_token_logps_and_entropies = logps
    output = trainer._batch_of(chosen, StepCounts(), 2, 8)
    loss = trainer._compute_loss(trainer.model, output)
    (grad,) = torch.autograd.grad(loss, current)

    # by hand: GRPO's loss is mean_b sum_t l_bt m_bt / sum_t m_bt with l_bt = -w_bt A_b exp(π - π_old), π_old = π
    scores = {k: torch.cat([g.scores[k] for g in chosen]) for k in chosen[0].scores}
    advantages = trainer._plugin_advantages("train", G, scores, log=False, observe=False).advantages.view(8, 1)
    token_steps = torch.tensor([s for part in steps for s in part])
    stale = token_steps < token_steps.max(dim=1, keepdim=True).values
    assert stale.sum() == 6
    if mode == "mask":
        mask, weight = (~stale).float(), torch.ones(8, 4)
    else:
        mask = torch.ones(8, 4)
        weight = torch.where(stale, torch.minimum(torch.exp(current.detach() - behaviour), torch.tensor(cap)), 1.0)
        assert (weight[stale] == cap).any() and (weight[stale] < cap).any()  # the cap binds on some, not all
    expected = -advantages * weight * mask / mask.sum(dim=1, keepdim=True) / 8
    assert torch.allclose(grad, expected, atol=1e-6), (grad, expected)
    assert (grad[stale] == 0).all() if mode == "mask" else (grad[stale] != 0).any()


# -- training runs with a scripted generator (varied lengths, so that trajectories span steps) ------------
class Script:
    """Stands in for TRL's generator below the seam (``GRPOTrainer._generate_single_turn``): digits, and EOS with
    probability ``eos`` after each one; records every context it continued and what it wrote."""

    def __init__(self, eos: float):
        self.eos, self.segments = eos, []

    def __call__(self, trainer, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for ids in prompt_ids:
            new: list[int] = []
            while len(new) < trainer.generation_config.max_new_tokens:
                if torch.rand(()) < self.eos:
                    new.append(trainer.eos_token_ids[0])
                    break
                new.append(DIGITS[int(torch.randint(10, ()))])
            self.segments.append((list(ids), new))
            out.append(new)
        return out, None


def scripted(monkeypatch, eos):
    from trl import GRPOTrainer

    script = Script(eos)
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", lambda self, *a, **k: script(self, *a, **k))
    return script


def trained_ids(trainer):
    """Wrap ``_batch_of``: record the ids of the groups each step trains on and their (prompt, completion) rows."""
    seen: list = []
    batch_of = trainer._batch_of

    def recording(chosen, *args):
        seen.append([(g.id, g.rows["prompt_ids"], g.rows["completion_ids"], g.rows[TOKEN_STEP]) for g in chosen])
        return batch_of(chosen, *args)

    trainer._batch_of = recording
    return seen


def segments_of(script, prompt, completion, limit):
    """How many recorded segments, continued one from another's end, make ``completion`` (None if none do)."""
    prefix, count = [], 0
    while len(prefix) < len(completion):
        context = prompt + prefix
        written = [new[: limit - len(prefix)] for ctx, new in script.segments if ctx == context]
        step = next((w for w in written if w and completion[len(prefix) : len(prefix) + len(w)] == w), None)
        if step is None:
            return None
        prefix, count = prefix + step, count + 1
    return count if prefix == completion else None


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tokens=st.integers(1, 4),
    eos=st.sampled_from([0.1, 0.3]),
    mode=st.sampled_from(["mask", "truncated-is"]),
    dapo=st.booleans(),
    iterations=st.sampled_from([1, 2]),
)
@example(tokens=2, eos=0.3, mode="truncated-is", dapo=True, iterations=2)  # always: both plugins, reused batches
def test_no_trajectory_lost_or_trained_twice_and_each_is_its_segments_concatenated(
    tmp_path_factory, tokenizer, digits_module, monkeypatch_module, tokens, eos, mode, dapo, iterations
):
    script = scripted(monkeypatch_module, eos)
    plugins = {"dapo-dynamic-sampling": {"max_rounds": 6, "keep_leftovers": True}} if dapo else {}
    trainer = trainer_with(
        tmp_path_factory.mktemp("run"),
        tokenizer,
        {"segment_tokens": tokens, "stale_segments": mode},
        plugins,
        max_steps=4,
        num_iterations=iterations,
    )
    seen = trained_ids(trainer)
    trainer.train()
    pool, continuing = trainer._rlvr_pool, trainer._rlvr_continuations
    assert continuing.started == continuing.completed + G * len(continuing.pending)  # trajectories
    assert continuing.completed == G * pool.generated
    assert pool.generated == pool.trained + pool.dropped + len(pool.groups)  # groups
    ids = [gid for step in seen for gid, *_ in step]
    assert len(ids) == len(set(ids)) == 4 // iterations * 2  # a generation batch serves num_iterations steps
    limit = trainer.max_completion_length
    for step in seen:
        for _, prompts, completions, token_steps in step:
            for prompt, completion, steps in zip(prompts, completions, token_steps, strict=True):
                count = segments_of(script, prompt.tolist(), completion.tolist(), limit)
                assert count is not None and count >= -(-completion.numel() // tokens) - 1, (prompt, completion)
                assert steps.numel() == completion.numel() and (steps.diff() >= 0).all()
    stale = [h["pool/stale_token_frac"] for h in trainer.state.log_history if "pool/stale_token_frac" in h]
    assert len(stale) == 4 // iterations


@pytest.fixture(scope="module")
def digits_module():
    from rlvr_plugins.manager import temporary_plugin
    from rlvr_plugins.testing import reward_plugin_class

    with temporary_plugin(reward_plugin_class("digits", digit_share, isolated=False)):
        yield


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("mode", ["mask", "truncated-is"])
def test_stale_segments_train_across_steps_with_their_metrics(tmp_path, tokenizer, digits_module, monkeypatch, mode):
    scripted(monkeypatch, 0.2)
    options = {"segment_tokens": 1, "stale_segments": mode}
    trainer = trainer_with(tmp_path, tokenizer, options, max_steps=4, max_completion_length=12, learning_rate=0.05)
    trainer.train()
    history = trainer.state.log_history
    stale = [h["pool/stale_token_frac"] for h in history if "pool/stale_token_frac" in h]
    carried = [h["pool/partial_carried"] for h in history if "pool/partial_carried" in h]
    assert max(stale) > 0 and max(carried) > 0 and all(0 <= s < 1 for s in stale)
    segments = [h["pool/segments_per_trajectory"] for h in history if "pool/segments_per_trajectory" in h]
    assert all(s >= 1 for s in segments) and max(segments) > 1
    weights = [(h["pool/is_weight_min"], h["pool/is_weight_max"]) for h in history if "pool/is_weight_min" in h]
    if mode == "truncated-is":
        assert weights and all(0 < low <= high <= 3.0 for low, high in weights)
    else:
        assert not weights
    assert all(h["loss"] == h["loss"] for h in history if "loss" in h)


CURRICULUM = {"kimi-curriculum": {"schedule": "none", "correctness_reward": "digits", "skip_zero_variance_steps": 1}}


@pytest.mark.parametrize("plugins", [{}, CURRICULUM], ids=["repeat-sampler", "kimi-curriculum"])
def test_a_resumed_run_continues_the_same_unfinished_trajectories(
    tmp_path, tokenizer, digits_module, monkeypatch, plugins
):
    """With kimi-curriculum as the train sampler, the groups in flight at the checkpoint are counted by the resumed
    run when they finish, as by the uninterrupted one: the same counts, blocks and in-flight set at the end."""
    from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE
    from rlvr_plugins.trainer import PARTIAL_STATE_KEY

    scripted(monkeypatch, 0.2)
    options = {"segment_tokens": 1, "stale_segments": "truncated-is"}
    args = dict(max_steps=4, max_completion_length=12, learning_rate=0.05, save_strategy="steps", save_steps=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bitwise-equal CPU reductions between the two runs
    try:
        a = trainer_with(tmp_path / "a", tokenizer, options, plugins, **args)
        a.train()
        waiting = {
            step: json.loads((tmp_path / "a" / "run" / f"checkpoint-{step}" / PLUGIN_STATE_FILE).read_text())[
                PARTIAL_STATE_KEY
            ]["pending"]
            for step in (1, 2, 3)
        }
        resume_at = next(step for step, pending in waiting.items() if pending)
        b = trainer_with(tmp_path / "b", tokenizer, options, plugins, **args)
        b.train(resume_from_checkpoint=str(tmp_path / "a" / "run" / f"checkpoint-{resume_at}"))
    finally:
        torch.set_num_threads(threads)
    assert b.state.global_step == 4
    keys = ["loss", "pool/rounds", "pool/stale_token_frac", "pool/partial_carried", "pool/is_weight_mean"]
    for key in keys + ["curriculum/prompts_seen", "curriculum/blocked_prompts"] * bool(plugins):
        got = [h[key] for h in b.state.log_history if key in h]
        assert got == pytest.approx([h[key] for h in a.state.log_history if key in h], rel=1e-6, abs=1e-9), key
        assert got or key.startswith("pool/is_weight"), key
    assert b._rlvr_continuations.state_dict() == a._rlvr_continuations.state_dict()
    if plugins:
        state = a.plugin_set.get("kimi-curriculum").state
        assert sum(state.attempts) == G * a._rlvr_pool.generated  # every finished group counted, once
        assert sorted(state.in_flight) == sorted(g.index for g in a._rlvr_continuations.pending)
        saved = json.loads((tmp_path / "a" / "run" / f"checkpoint-{resume_at}" / PLUGIN_STATE_FILE).read_text())
        assert saved["kimi-curriculum"]["in_flight"]  # the checkpoint held groups in flight
        assert (
            b.plugin_set.get("kimi-curriculum").rlvr_state_dict()
            == a.plugin_set.get("kimi-curriculum").rlvr_state_dict()
        )


def test_a_looping_trajectory_is_cut_when_its_token_ngrams_repeat(tmp_path, tokenizer, digits_module, monkeypatch):
    from trl import GRPOTrainer

    def loop(self, prompt_ids, *args, **kwargs):  # "5656…", never EOS
        n = self.generation_config.max_new_tokens
        return [[DIGITS[5 + (len(ids) + j) % 2] for j in range(n)] for ids in prompt_ids], None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", loop)
    lengths = {}
    for ngram in (0, 2):
        options = {"segment_tokens": 2, "repeat_ngram": ngram, "repeat_share": 0.5}
        trainer = trainer_with(tmp_path / str(ngram), tokenizer, options, max_steps=1, max_completion_length=12)
        seen = trained_ids(trainer)
        trainer.train()
        lengths[ngram] = {c.numel() for _, _, completions, _ in seen[0] for c in completions}
        stopped = [h["pool/repeat_stopped"] for h in trainer.state.log_history if "pool/repeat_stopped" in h]
        assert stopped == ([8.0] if ngram else [])
    # 4 tokens: bigrams 56 65 56, 1/3 repeat; 6 tokens: 56 65 56 65 56, 3/5 >= 0.5: cut there
    assert lengths == {0: {12}, 2: {6}}


ESTIMATORS = ["rloo", "batch-std", "mean-baseline", "reinforce++", "reinforce++-baseline", "opo", "gpg", "pass-at-k"]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_every_estimator_trains_on_continued_trajectories(tmp_path, tokenizer, digits_module, monkeypatch, estimator):
    scripted(monkeypatch, 0.2)
    options = {"segment_tokens": 1, "stale_segments": "truncated-is"}
    trainer = trainer_with(
        tmp_path, tokenizer, options, {estimator: {}}, max_steps=3, max_completion_length=12, learning_rate=0.05
    )
    trainer.train()
    history = trainer.state.log_history
    assert max(h.get("pool/stale_token_frac", 0) for h in history) > 0
    assert all(h["loss"] == h["loss"] for h in history if "loss" in h)  # finite: no NaN from (B, T) advantages


def segment_stand_in(plugins: dict):
    """What ``RLVRTrainer._segment_plan`` reads of a trainer: the plugin set and TRL's generation settings."""
    from types import SimpleNamespace

    return SimpleNamespace(
        plugin_set=build_plugin_set(plugins),
        use_vllm=False,
        tools=None,
        environment_factories=None,
        rollout_func=None,
        use_transformers_continuous_batching=False,
        loss_type="dapo",
        vllm_importance_sampling_correction=True,  # TRL's defaults
        vllm_importance_sampling_mode="sequence_mask",
        vllm_importance_sampling_clip_max=3.0,
    )


@pytest.mark.parametrize(
    ("setting", "refused"),
    [
        ({"tools": [print]}, "tools or an environment"),
        ({"loss_type": "vespo"}, "loss_type 'vespo'"),
    ],
)
def test_partial_rollouts_are_refused_at_start_up_where_continuing_is_not_reachable(setting, refused):
    from types import SimpleNamespace

    from rlvr_plugins.errors import PluginError
    from rlvr_plugins.trainer import RLVRTrainer

    trainer = segment_stand_in({"kimi-partial-rollouts": {"stale_segments": "truncated-is"}})
    assert RLVRTrainer._segment_plan(trainer, SimpleNamespace()).tokens == 64
    trainer.__dict__.update(setting)
    with pytest.raises(
        PluginError, match=f"plugin 'kimi-partial-rollouts' \\(partial rollouts\\) cannot run with {refused}"
    ):
        RLVRTrainer._segment_plan(trainer, SimpleNamespace())


def test_under_vllm_truncated_is_is_trls_correction_and_any_other_correction_is_refused_at_start_up():
    """Under vLLM the stale tokens' sampling log-probs are their behaviour log-probs, so TRL's correction, when on,
    weighs them: it must be the plan's per-token truncation at is_cap, or the two would differ (or count twice)."""
    from types import SimpleNamespace

    from rlvr_plugins.errors import PluginError
    from rlvr_plugins.trainer import RLVRTrainer

    def plan(options, **trl):
        trainer = segment_stand_in({"kimi-partial-rollouts": options})
        trainer.__dict__.update(use_vllm=True, **trl)
        return RLVRTrainer._segment_plan(trainer, SimpleNamespace())

    assert plan({}).tokens == 64  # mask: TRL's correction (any mode) never sees a stale token's log-prob
    token = {"vllm_importance_sampling_mode": "token_truncate"}
    assert plan({"stale_segments": "truncated-is"}, **token).is_cap == 3.0
    assert plan({"stale_segments": "truncated-is", "is_cap": 2.0}, vllm_importance_sampling_correction=False)
    with pytest.raises(
        PluginError,
        match=r"cannot run with vLLM's importance-sampling correction as configured \(vllm_importance_sampling_mode "
        r"'sequence_mask', vllm_importance_sampling_clip_max 3.0\): .* set vllm_importance_sampling_mode: "
        r"token_truncate and vllm_importance_sampling_clip_max: 3.0 \(the plugin's is_cap\)",
    ):
        plan({"stale_segments": "truncated-is"})
    with pytest.raises(PluginError, match=r"vllm_importance_sampling_clip_max: 2.0 \(the plugin's is_cap\)"):
        plan({"stale_segments": "truncated-is", "is_cap": 2.0}, **token)


def test_partial_rollouts_are_refused_beside_a_sampler_that_learns_from_its_groups_without_keeping_them_in_flight():
    """A sampler that counts each group against the prompts it drew for that step and round cannot tell a
    continued group, which finishes later; kimi-curriculum keeps its groups in flight (rlvr_pool_started) and is
    accepted, a third-party sampler that learns from rlvr_on_rewards without that hook is refused, naming it."""
    from types import SimpleNamespace

    from rlvr_plugins import Plugin, hookimpl
    from rlvr_plugins.errors import PluginError
    from rlvr_plugins.manager import temporary_plugin
    from rlvr_plugins.trainer import RLVRTrainer

    class Counting(Plugin):
        name = "counting-sampler"

        @hookimpl
        def rlvr_train_sampler(self, dataset):
            return None

        @hookimpl
        def rlvr_pool_prompts(self, num_prompts):
            return list(range(num_prompts))

        @hookimpl
        def rlvr_on_rewards(self, example_indices):
            pass

    trainer = segment_stand_in({"kimi-partial-rollouts": {}, "kimi-curriculum": {}})
    assert RLVRTrainer._segment_plan(trainer, SimpleNamespace()).tokens == 64
    with temporary_plugin(Counting):
        trainer = segment_stand_in({"kimi-partial-rollouts": {}, "counting-sampler": {}})
    with pytest.raises(
        PluginError, match="cannot run with the train sampler 'counting-sampler', which learns .* rlvr_pool_started"
    ):
        RLVRTrainer._segment_plan(trainer, SimpleNamespace())


CHECK_PROBE = """
import sys
from rlvr_plugins.cli import main
code = main(sys.argv[1:])
print(f"EXIT {code} " + ",".join(m for m in ("torch", "trl", "transformers") if m in sys.modules))
"""


@pytest.mark.parametrize(
    ("sets", "refused"),
    [
        (
            ["trainer.loss_type=vespo", "plugins.kimi-partial-rollouts.stale_segments=truncated-is"],
            "loss_type 'vespo' with stale segments 'truncated-is'",
        ),
        (
            ["trainer.use_vllm=true", "plugins.kimi-partial-rollouts.stale_segments=truncated-is"],
            "vLLM's importance-sampling correction as configured (vllm_importance_sampling_mode 'sequence_mask'",
        ),
    ],
)
def test_rlvr_train_check_refuses_what_partial_rollouts_cannot_run_with_before_heavy_imports(sets, refused):
    """Before: ``--check`` said "config OK" and the run stopped only once its model had loaded."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    recipe = Path(__file__).resolve().parents[3] / "configs" / "kimi_partial.yaml"
    args = ["train", str(recipe), "--check", *(part for value in sets for part in ("--set", value))]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", CHECK_PROBE, *args], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "EXIT 2", (done.stdout, done.stderr[-2000:])  # and no torch, TRL, transformers
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"plugin 'kimi-partial-rollouts' (partial rollouts) cannot run with {refused}" in done.stderr


def test_prompts_skipped_before_generating_are_replaced_only_in_the_places_continued_groups_leave(
    tmp_path, tokenizer, digits_module, monkeypatch
):
    """Skipping with partial rollouts: the continued groups take the first places of a round, so only the rest
    are skipped and replaced (before: the whole batch was, then cut, so ``pool/skipped_prompts`` could count
    replacements that were never generated); every started prompt is one the skip plugin let through."""
    from typing import ClassVar

    from rlvr_plugins import Plugin, hookimpl
    from rlvr_plugins.manager import temporary_plugin

    class SkipEvenLog(Plugin):
        name = "skip-even-log"
        started: ClassVar[list] = []

        @hookimpl
        def rlvr_skip_prompts(self, prompts):
            return [p for p in prompts if p % 2 == 0]

        @hookimpl
        def rlvr_pool_started(self, prompts, step, round):
            SkipEvenLog.started.append((step, round, list(prompts)))

    scripted(monkeypatch, 0.2)
    SkipEvenLog.started = []
    with temporary_plugin(SkipEvenLog):
        trainer = trainer_with(
            tmp_path, tokenizer, {"segment_tokens": 1}, {"skip-even-log": {}}, max_steps=6, max_completion_length=12
        )
    trainer.train()
    starts = SkipEvenLog.started
    assert all(p % 2 for _, _, prompts in starts for p in prompts)  # 8 odd prompts of 16: never short of them
    assert any(len(prompts) < 2 for _, _, prompts in starts)  # some rounds had continued groups in their places
    skipped = [h["pool/skipped_prompts"] for h in trainer.state.log_history if "pool/skipped_prompts" in h]
    started = [sum(len(p) for s, _, p in starts if s == step) for step in range(6)]
    assert len(skipped) == 6 and sum(skipped) > 0
    assert all(k <= n for k, n in zip(skipped, started, strict=True)), (skipped, started)


def test_a_checkpoints_unfinished_groups_dropped_by_a_run_without_partial_rollouts_are_warned_about(tmp_path, caplog):
    from types import SimpleNamespace

    from rlvr_plugins.checkpoints import PLUGIN_STATE_FILE
    from rlvr_plugins.trainer import PARTIAL_STATE_KEY, RLVRTrainer

    (tmp_path / PLUGIN_STATE_FILE).write_text(json.dumps({PARTIAL_STATE_KEY: {"pending": [{"index": 3}] * 2}}))
    stand_in = SimpleNamespace(plugin_set=build_plugin_set({}), _rlvr_pool=None, _rlvr_continuations=None)
    with caplog.at_level("WARNING", logger="rlvr_plugins.trainer"):
        RLVRTrainer._load_plugin_state(stand_in, str(tmp_path))
    assert "the checkpoint holds 2 unfinished groups of partial rollouts" in caplog.text
    assert "they are dropped" in caplog.text
