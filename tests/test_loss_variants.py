"""The ``policy-loss`` plugin (clip on/off, length normalisation by name), off-policy ratio logging,
the penalty-shaping rule (fault item 14) and the length-by-correctness metrics."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_plugins.advantages import finalize_advantages, grpo_advantages, shaping_advantages
from rlvr_plugins.builtin.loss import contradictions, loss_settings
from rlvr_plugins.errors import ConfigError
from rlvr_plugins.manager import build_plugin_set
from rlvr_plugins.train.run import grpo_kwargs


def ends_in_digit(*, prompt, completion, example):
    return 1.0 if completion.strip()[-1:].isdigit() else 0.0


@pytest.fixture
def trainer_ending_in_digit(tiny_trainer, reward_plugin):
    """``tiny_trainer`` with the plugin ``ends-in-digit`` (reward ``ends_in_digit``) registered and enabled first."""
    reward_plugin("ends-in-digit", ends_in_digit, reward_name="ends_in_digit", isolated=False)
    return lambda plugins=None, **trainer: tiny_trainer({"ends-in-digit": {}, **(plugins or {})}, **trainer)


# -- configuration -----------------------------------------------------------------------


def test_names_map_to_trl_settings():
    assert loss_settings(False, None) == {"epsilon": math.inf, "epsilon_high": math.inf}
    assert loss_settings(True, "per-response") == {"loss_type": "grpo"}
    assert loss_settings(True, "constant") == {"loss_type": "dr_grpo"}
    assert loss_settings(True, "token-mean") == {"loss_type": "dapo"}


def test_contradictions_name_the_key_and_the_option():
    assert contradictions({"learning_rate": 1e-6}, clip=False, length_normalization="constant") == []
    problems = contradictions({"epsilon": 0.2, "loss_type": "grpo"}, clip=False, length_normalization="constant")
    assert len(problems) == 2
    assert "trainer.epsilon=0.2" in problems[0] and "clip: false" in problems[0]
    assert "trainer.loss_type='grpo'" in problems[1] and "constant" in problems[1]
    assert (
        "no clipped PPO surrogate" in contradictions({"loss_type": "cispo"}, clip=False, length_normalization=None)[0]
    )


def test_grpo_kwargs_apply_the_plugin_and_refuse_contradictions():
    config = {"output_dir": "x", "plugins": {"policy-loss": {"clip": False, "length_normalization": "constant"}}}
    kwargs = grpo_kwargs(config, build_plugin_set(config["plugins"]))
    assert kwargs["epsilon"] == kwargs["epsilon_high"] == math.inf and kwargs["loss_type"] == "dr_grpo"
    with pytest.raises(ConfigError, match="trainer.epsilon_high=0.28 contradicts plugin 'policy-loss'"):
        grpo_kwargs({**config, "trainer": {"epsilon_high": 0.28}}, build_plugin_set(config["plugins"]))


def test_unknown_normalization_lists_the_valid_names():
    with pytest.raises(Exception, match="length_normalization") as info:
        build_plugin_set({"policy-loss": {"length_normalization": "per-token"}})
    assert "per-response" in str(info.value) and "token-mean" in str(info.value)


def test_two_plugins_setting_one_trainer_field_differently_is_an_error():
    pytest.importorskip("rlvr_dr_grpo")
    plugins = {"dr-grpo": {}, "policy-loss": {"length_normalization": "per-response"}}
    with pytest.raises(ConfigError, match=r"plugins 'dr-grpo' and 'policy-loss' both set trainer.loss_type"):
        grpo_kwargs({"output_dir": "x", "plugins": plugins}, build_plugin_set(plugins))
    agreeing = {"dr-grpo": {}, "policy-loss": {"length_normalization": "constant"}}
    assert grpo_kwargs({"output_dir": "x"}, build_plugin_set(agreeing))["loss_type"] == "dr_grpo"


# -- the loss, against an independent computation --------------------------------------------


def _batch(trainer, tokenizer):
    """Two prompts × two completions with chosen lengths, advantages and old log-probs."""
    torch.manual_seed(0)
    prompt = tokenizer(["12+34=", "56+78="], add_special_tokens=False)["input_ids"]
    prompt_ids = torch.tensor([prompt[0], prompt[0], prompt[1], prompt[1]])
    completion_ids = torch.randint(3, len(tokenizer), (4, 6))
    completion_mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0], [1] * 2 + [0] * 4])
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    with torch.no_grad():
        logits = trainer.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
    logits = logits[:, prompt_ids.size(1) - 1 : -1] / trainer.temperature
    logps = torch.log_softmax(logits.float(), -1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    shift = torch.linspace(-0.6, 0.6, 24).view(4, 6)  # ratios from exp(-0.6) to exp(0.6): far outside [0.8, 1.2]
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -1.0, 0.5, -2.0]),
        "old_per_token_logps": logps - shift,
        "ref_per_token_logps": logps + 0.3 * shift,
        "num_items_in_batch": completion_mask.sum(),
    }, logps


def _expected(inputs, logps, clip, normalization, beta, max_len):
    ratio = torch.exp(logps - inputs["old_per_token_logps"])
    adv = inputs["advantages"].unsqueeze(1)
    if clip:
        per_token = -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    else:
        per_token = -ratio * adv
    d = inputs["ref_per_token_logps"] - logps
    per_token = per_token + beta * (torch.exp(d) - d - 1) * ratio  # k3 KL, importance-corrected (TRL's default)
    m = inputs["completion_mask"].float()
    if normalization == "per-response":
        return ((per_token * m).sum(1) / m.sum(1)).mean()
    if normalization == "constant":
        return (per_token * m).sum() / (m.size(0) * max_len)
    return (per_token * m).sum() / m.sum()


@pytest.mark.parametrize("normalization", ["per-response", "constant", "token-mean"])
@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_loss_equals_the_formula(tokenizer, trainer_ending_in_digit, clip, normalization, beta):
    trainer = trainer_ending_in_digit(
        {"policy-loss": {"clip": clip, "length_normalization": normalization}}, max_completion_length=6
    )
    trainer.beta = beta
    trainer.model.eval()
    inputs, logps = _batch(trainer, tokenizer)
    loss = trainer._compute_loss(trainer.model, inputs)
    expected = _expected(inputs, logps, clip, normalization, beta, max_len=6)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    other = _expected(inputs, logps, not clip, normalization, beta, max_len=6)
    assert abs(other.item() - expected.item()) > 1e-3  # the inputs do exercise the clipped branch
    clipped = trainer._metrics["eval"]["clip_ratio/region_mean"][-1]
    assert (clipped > 0) if clip else (clipped == 0)
    shift = (logps - inputs["old_per_token_logps"])[inputs["completion_mask"].bool()]
    assert trainer._metrics["eval"]["rlvr/ratio/max"][-1] == pytest.approx(math.exp(shift.max()), rel=1e-4)
    assert trainer._metrics["eval"]["rlvr/ratio/min"][-1] == pytest.approx(math.exp(shift.min()), rel=1e-4)


def test_unclipped_gradient_is_the_plain_policy_gradient(tokenizer, trainer_ending_in_digit):
    """With clip off, d loss / d logp_t = -rho_t A / |o| (per-response), also where clipping would cut it."""
    trainer = trainer_ending_in_digit(
        {"policy-loss": {"clip": False, "length_normalization": "per-response"}}, max_completion_length=6
    )
    inputs, logps = _batch(trainer, tokenizer)
    logps = logps.clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logps, torch.zeros_like(logps), None)
    trainer.model.eval()
    trainer._compute_loss(trainer.model, inputs).backward()
    ratio = torch.exp(logps.detach() - inputs["old_per_token_logps"])
    m = inputs["completion_mask"].float()
    expected = -ratio * inputs["advantages"].unsqueeze(1) * m / m.sum(1, keepdim=True) / 4
    assert torch.allclose(logps.grad, expected, atol=1e-6)


def test_off_policy_inner_steps_log_a_drifting_ratio(trainer_ending_in_digit):
    trainer = trainer_ending_in_digit(num_iterations=4, max_steps=8, learning_rate=3e-2)
    trainer.train()
    drift = [h["rlvr/ratio/abs_log_mean"] for h in trainer.state.log_history if "rlvr/ratio/abs_log_mean" in h]
    assert len(drift) == 8
    for start in (0, 4):  # each generation batch: on-policy first, then drifting away from ratio 1
        inner = drift[start : start + 4]
        assert inner[0] < 1e-5
        assert all(x > 1e-4 for x in inner[1:]) and inner[3] > inner[1]


# -- rule 14: shaping is centred, not std-scaled ---------------------------------------------


def test_all_wrong_group_differing_only_in_length_keeps_small_advantages():
    outcome = torch.zeros(4)
    penalty = torch.tensor([-0.01, -0.02, -0.03, -0.04])
    valid = torch.ones(4, dtype=torch.bool)
    blown_up = grpo_advantages(outcome + penalty, valid, 4)  # what std division of reward + penalty gives
    assert blown_up.abs().max() > 1.0
    raw = grpo_advantages(outcome, valid, 4) + shaping_advantages(penalty, valid, 4)
    advantages, zero_var = finalize_advantages(raw, outcome + penalty, valid, 4)
    assert torch.allclose(advantages, torch.tensor([0.015, 0.005, -0.005, -0.015]), atol=1e-7)
    assert not zero_var.any()


def test_shaping_advantages_leave_out_invalid_completions():
    shaping = torch.tensor([1.0, 2.0, 3.0, 100.0])
    valid = torch.tensor([True, True, True, False])
    assert shaping_advantages(shaping, valid, 4).tolist() == [-1.0, 0.0, 1.0, 0.0]


# -- metrics ---------------------------------------------------------------------------------


def test_response_length_is_logged_for_correct_and_wrong_completions(trainer_ending_in_digit):
    trainer = trainer_ending_in_digit(max_steps=3)
    seen = []
    original = trainer._log_lengths

    def spy(metrics, rewards_per_func, lengths, names):
        seen.append((rewards_per_func[:, 0].clone(), lengths.clone()))
        original(metrics, rewards_per_func, lengths, names)

    trainer._log_lengths = spy
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rlvr/correct_rate" in h]
    assert len(logged) == len(seen) == 3
    for h, (values, lengths) in zip(logged, seen):
        correct = values >= 1.0
        assert h["rlvr/correct_rate"] == pytest.approx(correct.float().mean().item())
        if correct.any():
            assert h["completions/mean_length_correct"] == pytest.approx(lengths[correct].float().mean().item())
        if (~correct).any():
            assert h["completions/mean_length_wrong"] == pytest.approx(lengths[~correct].float().mean().item())


def test_ratio_statistics_by_hand():
    from rlvr_plugins.trainer import ratio_statistics

    logps = torch.log(torch.tensor([[2.0, 0.5, 9.0], [1.0, 4.0, 9.0]]))
    old = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    stats = ratio_statistics(logps, old, mask)  # ratios 2, 0.5, 1 kept; the 9s and the 4 masked out
    expected = [3.5, math.log(2) + math.log(2) + 0.0, 3.0, 2.0, 0.5]
    assert stats.tolist() == pytest.approx(expected)
    empty = ratio_statistics(logps, old, torch.zeros(2, 3))
    assert empty[:3].tolist() == [0.0, 0.0, 0.0] and empty[3] == -math.inf and empty[4] == math.inf
