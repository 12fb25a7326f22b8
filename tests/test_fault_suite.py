"""The fault suite of issue 6: one test per numbered item, each asserting the stated outcome.

Outcomes: **0** the model's output is wrong or malformed (a verdict of 0.0, not failed);
**M** the scorer could not decide (failed, NaN, masked: advantage 0, counted in a metric);
**E** a contract or config bug (an exception naming the culprit).

Rewards are scored the way a run scores them: the R1 plugins' registered functions through
``Engines`` (worker processes with a hard deadline and a memory limit); the training-path
items run one or two steps of a tiny trainer (``rlvr_plugins.testing``) and read the logged
metrics and the advantages handed to ``rlvr_on_rewards``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import math
import threading
import time

import pytest

import engine_fixtures as fx
import fault_rewards as fr
from rlvr_plugins import Plugin, RewardFunction, hookimpl
from rlvr_plugins.engine import RewardContractError, RewardEngine, RewardPluginFailing
from rlvr_plugins.errors import (
    PluginConflictError,
    PluginContractError,
    PluginValidationError,
    UnknownPluginError,
)
from rlvr_plugins.manager import build_plugin_set, temporary_plugin
from rlvr_plugins.rewards import Engines
from rlvr_plugins.testing import TINY_TRAINER, tiny_trainer
from rlvr_plugins.train.run import prepare

DEADLINE = 10.0  # a run's default engine.timeout_s
MEMORY_MB = 1024
K = 3  # max_consecutive_failures of the shared engine
SLACK = 3.0  # kill, reap and restart a worker on a busy 2-core machine
CHINESE_COT = "首先，我们计算 6 乘以 7，得到 42。所以答案是 42。"
TOWER = r"\boxed{2^{2^{2^{2^{2^{100}}}}}}"
FACTORIAL = r"\boxed{(10^{100})!}"
BRACKETS = r"\boxed{" + "(" * 3000 + "1" + ")" * 3000 + "}"


def rows(completions, answer="42"):
    return [{"prompt": "What is 6 * 7?", "completion": c, "example": {"answer": answer}} for c in completions]


def decided(engines, reward, items):
    """The verdicts of a reward that must decide every item (no M)."""
    result = engines.score(reward, items)
    assert not any(result.failed), result.errors
    return result.values


@pytest.fixture(scope="module")
def r1():
    """The R1 rewards as a run registers them, and one engine with workers, deadline and memory limit."""
    plugin_set = build_plugin_set({"r1-accuracy": {}, "r1-format": {}, "r1-language": {"target": "zh"}})
    rewards = {reward.name: reward for _, reward in plugin_set.reward_functions()}
    engines = Engines(
        num_workers=1, timeout_s=DEADLINE, memory_limit_mb=MEMORY_MB, max_consecutive_failures=K, max_completion_mb=16
    )  # test_05 gives the rewards a 10 MB completion: over the default max_completion_mb (4), refused unscored
    yield engines, rewards
    engines.close()


def accuracy_and_format(r1, completions, answer="42"):
    engines, rewards = r1
    items = rows(completions, answer)
    return [decided(engines, rewards[name], items) for name in ("r1-accuracy", "r1-format")]


# ------------------------------------------------------------------ 1-4: malformed output scores 0


def test_01_no_answer_or_no_boxed_scores_0(r1):
    completions = [
        "",
        "The answer is 42.",
        r"<think>6 * 7 = 42</think> The answer is 42.",
        r"so \boxed{42",
        r"<think>6 * 7</think> \boxed{}",
        r"<think>6 * 7 = 42</think> \boxed{42}",
    ]
    accuracy, fmt = accuracy_and_format(r1, completions)
    assert accuracy == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert fmt == [0.0] * 6


def test_02_empty_think_or_answer_block_is_format_0(r1):
    completions = [
        "<think></think> <answer>42</answer>",
        "<think> \n </think> <answer>42</answer>",
        "<think>6 * 7 = 42</think> <answer> </answer>",
        "<think>6 * 7 = 42</think> <answer></answer>",
        "<think>6 * 7 = 42</think> <answer>42</answer>",
    ]
    accuracy, fmt = accuracy_and_format(r1, completions)
    assert fmt == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert accuracy == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_03_nested_or_duplicated_blocks_are_format_0_and_accuracy_reads_the_final_answer_block(r1):
    completions = [
        "<think>a <think>b</think> c</think> <answer>42</answer>",
        "<think>a</think> <think>b</think> <answer>42</answer>",
        "<think>maybe <answer>41</answer></think> <answer>42</answer>",
        "<think>maybe <answer>42</answer></think> <answer>41</answer>",
        # Two answer blocks after the thinking: the plugin's documented rule (rlvr-r1 README,
        # "Final answer") reads them as ambiguous, like answer spraying (item 4): 0.
        "<think>t</think> <answer>41</answer> <answer>42</answer>",
        "<think>t</think> <answer><answer>42</answer></answer>",
    ]
    accuracy, fmt = accuracy_and_format(r1, completions)
    assert fmt == [0.0] * 6
    assert accuracy == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_04_answer_only_in_the_thinking_or_sprayed_scores_0(r1):
    completions = [
        r"<think>so it is \boxed{42}</think> done",
        "<think><answer>42</answer></think>",
        "<think>#### 42</think> I am not sure.",
        r"<think>the answer is \boxed{42}",
        "<think>t</think> <answer>41 or 42</answer>",
        r"<think>t</think> <answer>\boxed{41} \boxed{42}</answer>",
        "<think>t</think> <answer>40, 41, 42</answer>",
        "<think>t</think> <answer>either 41 or 42</answer>",
        r"<think>t</think> <answer>42 \pm 1</answer>",
        r"<think>t</think> \boxed{41} and \boxed{42}",
        "<think>t</think> <answer>42</answer>",
    ]
    accuracy, _ = accuracy_and_format(r1, completions)
    assert accuracy == [0.0] * 10 + [1.0]


# ------------------------------------------------------------------ 5-6: huge and strange input


def test_05_huge_completion_and_repeated_tags_are_scored_within_the_deadline_in_bounded_memory(r1):
    engines, rewards = r1
    huge = "<think>" + "step " * (2 * 1024 * 1024) + "</think> <answer>42</answer>"
    tags = "<think></think><answer>" * (300 * 1024 // 23)
    assert len(huge) > 10 * 1024 * 1024 and len(tags) > 290 * 1024
    for name, expected in (("r1-accuracy", [1.0, 0.0]), ("r1-format", [1.0, 0.0])):
        start = time.monotonic()
        assert decided(engines, rewards[name], rows([huge, tags])) == expected
        assert time.monotonic() - start < DEADLINE
    limit = RewardFunction("memory-limit", fr.address_space_limit_mb)
    assert decided(engines, limit, rows([""])) == [MEMORY_MB]


class StrictAsciiHandler(logging.StreamHandler):
    """Writes to an ASCII-only stream and re-raises any error: a log line that cannot be encoded fails the test."""

    def __init__(self):
        super().__init__(io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict", write_through=True))
        self.lines: list[str] = []

    def emit(self, record):
        super().emit(record)
        self.lines.append(self.format(record))

    def handleError(self, record):
        raise


def test_06_chinese_cot_unicode_minus_and_control_characters_get_correct_verdicts_and_safe_logs(r1):
    engines, rewards = r1
    chinese = f"<think>{CHINESE_COT}</think> <answer>\\boxed{{42}}</answer>"
    nasty = "<think>a\x00b \x1b[31mred\x1b[0m \ud800 lone</think> <answer>42</answer>"
    accuracy, fmt = accuracy_and_format(r1, [chinese, nasty, "\x1b[1m\\boxed{42}\x1b[0m\x00"])
    assert accuracy == [1.0, 1.0, 1.0] and fmt == [1.0, 1.0, 0.0]
    assert decided(engines, rewards["r1-language"], rows([chinese])) == [1.0]
    minus = [
        "<think>t</think> <answer>\u22125</answer>",
        "<think>t</think> \\boxed{\u22125}",
        "<think>t</think> <answer>\u22126</answer>",
    ]
    assert decided(engines, rewards["r1-accuracy"], rows(minus, answer="-5")) == [1.0, 1.0, 0.0]

    handler = StrictAsciiHandler()
    log = logging.getLogger("rlvr_plugins.engine")
    log.addHandler(handler)
    try:
        result = engines.score(RewardFunction("raises\udfff", fr.always_raises), rows([nasty]))
    finally:
        log.removeHandler(handler)
    assert result.failed == [True] and result.errors == ["ValueError: broken plugin"]
    assert len(handler.lines) == 1
    line = handler.lines[0]
    assert line.isascii() and "\x00" not in line and "\x1b" not in line
    assert "\\ud800" in line and "\\x1b[31m" in line and "raises\\udfff" in line


# 7 (full-width and Arabic-Indic digits): implemented and tested in the plugin, plugins/rlvr-r1/tests.


# ------------------------------------------------------------------ 8-9: scorers that never return


def adversarial_is_0_or_masked(result):
    return all(failed or value == 0.0 for value, failed in zip(result.values, result.failed))


def test_08_latex_that_makes_sympy_run_forever_is_0_or_masked_within_the_deadline_on_every_path():
    timeout = 1.5
    plugin_set = build_plugin_set({"r1-accuracy": {}})
    ((_, accuracy),) = plugin_set.reward_functions()
    engines = Engines(num_workers=2, timeout_s=timeout, memory_limit_mb=MEMORY_MB)

    def timed(items):
        start = time.monotonic()
        result = engines.score(accuracy, rows(items))
        return result, time.monotonic() - start

    async def coroutine_path():
        in_loop = timed([BRACKETS])  # a coroutine calling the scorer directly (it blocks the loop)
        to_thread = await asyncio.to_thread(timed, [TOWER])
        return in_loop, to_thread

    try:
        main_result, main_elapsed = timed([TOWER, FACTORIAL, BRACKETS])  # one worker gets two of them
        box = {}
        thread = threading.Thread(target=lambda: box.update(result=timed([FACTORIAL])))
        thread.start()
        thread.join(60)
        assert not thread.is_alive()
        in_loop, to_thread = asyncio.run(coroutine_path())
        limit = engines.score(RewardFunction("memory-limit", fr.address_space_limit_mb), rows([""]))
        after = engines.score(accuracy, rows([r"<think>t</think> \boxed{42}"]))
    finally:
        engines.close()
    assert adversarial_is_0_or_masked(main_result) and main_elapsed < 2 * (timeout + SLACK)
    for result, elapsed in (box["result"], in_loop, to_thread):
        assert adversarial_is_0_or_masked(result) and elapsed < timeout + SLACK
    assert limit.values == [MEMORY_MB]  # the replaced workers keep the memory limit
    assert after.values == [1.0] and after.failed == [False]


def test_09_math_verify_raising_its_timeout_or_a_plugin_resetting_the_alarm_cannot_beat_the_deadline():
    raising = RewardFunction("math-verify-raising", fr.math_verify_raising)
    engines = Engines(num_workers=1, timeout_s=DEADLINE)
    try:
        start = time.monotonic()
        result = engines.score(raising, rows([TOWER], answer="$42$"))
        elapsed = time.monotonic() - start
        after = engines.score(raising, rows(["$42$"], answer="$42$"))
        stats = engines.stats()
    finally:
        engines.close()
    assert result.failed == [True] and result.errors[0].startswith("TimeoutException: ")
    assert elapsed < DEADLINE  # math-verify's 1 s alarm fired inside the worker, well before the deadline
    assert after.values == [1.0] and stats["workers_restarted"] == 0 and stats["failures"] == 1

    with RewardEngine(num_workers=1, timeout_s=1.0) as engine:
        assert engine.score("warm", fx.double, [{"x": 1}]).values == [2.0]
        start = time.monotonic()
        result = engine.score("disarms-alarm", fx.disarm_alarm_then_hang, [{"x": 1}])
        elapsed = time.monotonic() - start
        assert result.failed == [True] and result.errors == ["timeout after 1s"] and elapsed < 1.0 + SLACK
        assert engine.score("double", fx.double, [{"x": 2}]).values == [4.0]
        assert engine.stats["timeouts"] == 1


# ------------------------------------------------------------------ training-path helpers


class Seen(Plugin):
    """Records what every training batch handed to ``rlvr_on_rewards``."""

    name = "fault-suite-observer"

    def __init__(self, options=None):
        super().__init__(options)
        self.batches: list[dict] = []

    @hookimpl
    def rlvr_on_rewards(self, example_indices, rewards, advantages, valid):
        self.batches.append(
            {
                "indices": list(example_indices),
                "rewards": rewards.tolist(),
                "advantages": advantages.tolist(),
                "valid": valid.tolist(),
            }
        )


def seen_batches(trainer) -> list[dict]:
    """What the trainer's ``Seen`` instance recorded."""
    return trainer.plugin_set.get(Seen.name).batches


def trainer_with(tmp_path, rewards, *extra, engine=None, **trainer_overrides):
    """A tiny trainer whose plugin ``fault-rewards`` registers ``rewards`` ({name: fn}), with ``Seen`` enabled.

    ``engine`` options are set before the (lazily built) reward engine starts; rewards run in-process.
    """

    class FaultRewards(Plugin):
        name = "fault-rewards"

        @hookimpl
        def rlvr_reward_functions(self, register):
            for reward_name, fn in rewards.items():
                register(RewardFunction(reward_name, fn))

    plugins = (FaultRewards, Seen, *extra)
    with contextlib.ExitStack() as stack:
        for cls in plugins:
            stack.enter_context(temporary_plugin(cls))
        trainer = tiny_trainer(tmp_path, {cls.name: {} for cls in plugins}, **{"max_steps": 1, **trainer_overrides})
    trainer.engines.options.update(engine or {})
    return trainer


def step_logs(trainer):
    return [h for h in trainer.state.log_history if "rlvr/frac_no_score" in h]


def assert_masked(batch, masked_rows):
    """Rows ``masked_rows`` (by dataset index) are left out (valid False, advantage exactly 0, reward NaN)."""
    for index, valid, advantage, reward in zip(batch["indices"], batch["valid"], batch["advantages"], batch["rewards"]):
        masked = masked_rows(index)
        assert valid is not masked
        if masked:
            assert advantage == 0.0 and math.isnan(reward)
        assert math.isfinite(advantage)


# ------------------------------------------------------------------ 10-12: plugin bugs


def test_10_a_raising_plugin_is_masked_and_counted_then_an_error_after_k_in_a_row(tmp_path, one_torch_thread, r1):
    trainer = trainer_with(tmp_path, {"flaky": fr.raise_on_odd_rows})
    trainer.train()
    (batch,) = seen_batches(trainer)
    assert_masked(batch, lambda index: index % 2 == 1)
    odd = sum(index % 2 for index in batch["indices"])
    (logged,) = step_logs(trainer)
    assert odd > 0 and logged["rlvr/failed/flaky"] == odd and logged["rlvr/frac_no_score"] == odd / 8
    assert math.isfinite(logged["loss"])

    engines, _ = r1
    always = RewardFunction("always-raises", fr.always_raises)
    before = engines.stats().get("failures", 0)
    assert engines.score(always, rows(["a", "b"])).failed == [True, True]
    assert engines.stats()["failures"] == before + 2
    with pytest.raises(RewardPluginFailing) as info:
        engines.score(always, rows(["c", "d"]))
    assert "'always-raises'" in str(info.value) and f"{K} consecutive" in str(info.value)


class ReturnsNone(Plugin):
    name = "estimator-returns-none"

    @hookimpl
    def rlvr_compute_advantages(self, rewards):
        return None


class WrongLength(Plugin):
    name = "estimator-wrong-length"

    @hookimpl
    def rlvr_compute_advantages(self, rewards):
        return rewards[:-1].nan_to_num()


class PenaltyAsText(Plugin):
    name = "penalty-as-text"

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        return "0.1"


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        (ReturnsNone, "returned NoneType; expected a tensor"),
        (WrongLength, "returned shape (7,); expected (8,)"),
        (PenaltyAsText, "returned str; expected a tensor"),
    ],
)
def test_11_a_hook_returning_none_a_string_or_the_wrong_length_is_an_error(
    tmp_path, one_torch_thread, plugin, expected
):
    trainer = trainer_with(tmp_path, {"some-reward": fr.none_on_odd_rows}, plugin)
    with pytest.raises(PluginContractError) as info:
        trainer.train()
    assert f"plugin {plugin.name!r}" in str(info.value) and expected in str(info.value)
    assert seen_batches(trainer) == []


@pytest.mark.parametrize("value", ["0.5", {"score": 1.0}, [1.0] * 2, b"1"], ids=["str", "dict", "list", "bytes"])
def test_11_a_reward_returning_a_string_a_dict_or_a_list_is_an_error_never_broadcast(r1, value):
    engines, _ = r1
    reward = RewardFunction("returns-garbage", fx.returns)
    with pytest.raises(RewardContractError) as info:
        engines.score(reward, [{"value": 1.0}, {"value": value}])
    message = str(info.value)
    assert "'returns-garbage'" in message and "item 1" in message and type(value).__name__ in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e30, -1e30])
def test_12_nan_inf_or_huge_is_an_error_or_masked_and_counted_by_option(r1, value):
    engines, _ = r1
    reward = RewardFunction("returns-nonfinite", fx.returns)
    with pytest.raises(RewardContractError) as info:
        engines.score(reward, [{"value": 0.5}, {"value": value}])
    assert "'returns-nonfinite'" in str(info.value) and "item 1" in str(info.value)
    masking = Engines(in_process=True, nonfinite="mask")
    result = masking.score(reward, [{"value": 0.5}, {"value": value}])
    assert result.failed == [False, True] and result.values[0] == 0.5 and math.isnan(result.values[1])
    assert masking.stats()["failures"] == 1


def test_12_masked_nonfinite_rewards_never_reach_the_advantages(tmp_path, one_torch_thread):
    trainer = trainer_with(tmp_path, {"nonfinite": fr.nonfinite_on_odd_rows}, engine={"nonfinite": "mask"})
    trainer.train()
    (batch,) = seen_batches(trainer)
    assert_masked(batch, lambda index: index % 2 == 1)
    (logged,) = step_logs(trainer)
    odd = sum(index % 2 for index in batch["indices"])
    assert odd > 0 and logged["rlvr/failed/nonfinite"] == odd
    assert math.isfinite(logged["loss"]) and math.isfinite(logged["rlvr/reward_total"])


# ------------------------------------------------------------------ 13, 15: degenerate groups and batches


def test_13_all_0_all_1_or_all_035_groups_get_advantage_exactly_0_and_are_counted(tmp_path, one_torch_thread):
    trainer = trainer_with(
        tmp_path,
        {"constant-per-prompt": fr.zero_one_or_035_by_row},
        per_device_train_batch_size=12,
        shuffle_dataset=False,
    )
    trainer.train()
    (batch,) = seen_batches(trainer)
    groups = [batch["rewards"][i : i + 4] for i in range(0, 12, 4)]
    assert sorted(group[0] for group in groups) == pytest.approx([0.0, 0.35, 1.0])
    assert all(len(set(group)) == 1 for group in groups)
    assert batch["advantages"] == [0.0] * 12
    (logged,) = step_logs(trainer)
    assert logged["rlvr/frac_zero_variance_groups"] == 1.0 and logged["rlvr/advantage_abs_mean"] == 0.0


class LengthPenalty(Plugin):
    """-0.01 per completion token: the only thing that differs inside an all-wrong group."""

    name = "fault-length-penalty"

    @hookimpl
    def rlvr_length_penalty(self, completion_lengths):
        return -0.01 * completion_lengths.float()


def test_14_an_all_wrong_group_differing_only_by_length_penalty_is_not_blown_up(tmp_path, one_torch_thread):
    """Rule: the estimator (here the default grpo z-score) sees the outcome reward only; the
    penalty is added after it, centred on its group mean, never divided by a std
    (``advantages.shaping_advantages``, docs/loss-variants.md)."""
    seen_lengths = []
    trainer = trainer_with(tmp_path, {"always-wrong": fr.always_wrong}, LengthPenalty)
    original = trainer._log_lengths
    trainer._log_lengths = lambda m, r, lengths, n: (seen_lengths.append(lengths.clone()), original(m, r, lengths, n))
    trainer.train()
    (batch,) = seen_batches(trainer)
    (lengths,) = seen_lengths
    penalty = (-0.01 * lengths.float()).view(-1, 4)
    expected = (penalty - penalty.mean(1, keepdim=True)).reshape(-1)
    assert batch["advantages"] == pytest.approx(expected.tolist(), abs=1e-6)
    assert max(abs(a) for a in batch["advantages"]) <= 0.01 * (int(lengths.max()) - int(lengths.min())) + 1e-6
    assert any(a != 0 for a in batch["advantages"])  # the shaping still ranks short above long


NO_SCORE = "could not be scored by any reward"


def no_score_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if NO_SCORE in r.getMessage()]


def test_15_rows_undecided_by_every_reward_get_advantage_0(tmp_path, one_torch_thread, caplog):
    rewards = {"undecided-a": fr.none_on_odd_rows, "undecided-b": fr.none_on_odd_rows}
    trainer = trainer_with(tmp_path, rewards)
    with caplog.at_level(logging.WARNING, logger="rlvr_plugins.trainer"):
        trainer.train()
    (batch,) = seen_batches(trainer)
    assert_masked(batch, lambda index: index % 2 == 1)
    (logged,) = step_logs(trainer)
    odd = sum(index % 2 for index in batch["indices"])
    assert logged["rlvr/frac_no_score"] == odd / 8 and logged["rlvr/failed/undecided-a"] == 0
    assert math.isfinite(logged["loss"])
    (warning,) = no_score_warnings(caplog)  # one warning, with the count; TRL's per-row dump is filtered out
    assert warning.startswith(f"All reward functions returned None for {odd} of 8 completions of this batch: ")
    assert "this warning is not repeated" in warning  # TRL's words first, then ours
    assert "for the following kwargs" not in caplog.text  # TRL's per-row dump is filtered out


def test_15_the_warning_names_the_reward_that_failed_when_the_others_scored(tmp_path, one_torch_thread, caplog):
    """Issue 26: 'could not be scored by any reward' was wrong when one reward failed and the other scored."""
    trainer = trainer_with(tmp_path, {"flaky": fr.raise_on_odd_rows, "length": fr.text_length})
    with caplog.at_level(logging.WARNING, logger="rlvr_plugins.trainer"):
        trainer.train()
    (batch,) = seen_batches(trainer)
    odd = sum(index % 2 for index in batch["indices"])
    [warning] = [r.getMessage() for r in caplog.records if "have no score" in r.getMessage()]
    assert warning.startswith(
        f"{odd} of 8 completions of this batch have no score: reward 'flaky' failed (raised, timed out or "
        f"returned no usable value) on {odd}, which leaves them out even where the other rewards scored them: "
    )
    assert NO_SCORE not in warning


def test_15_a_batch_undecided_by_every_reward_gets_advantage_0_and_one_warning(tmp_path, one_torch_thread, caplog):
    trainer = trainer_with(tmp_path, {"undecided": fr.always_none}, max_steps=2)
    with caplog.at_level(logging.WARNING, logger="rlvr_plugins.trainer"):
        trainer.train()
    assert len(seen_batches(trainer)) == 2
    for batch in seen_batches(trainer):
        assert batch["valid"] == [False] * 8 and batch["advantages"] == [0.0] * 8
    logged = step_logs(trainer)
    assert [h["rlvr/frac_no_score"] for h in logged] == [1.0, 1.0]
    assert all(math.isfinite(h["loss"]) for h in logged)
    (warning,) = no_score_warnings(caplog)  # two undecided batches, one warning
    assert (
        warning.startswith("All reward functions returned None for 8 of 8 completions")
        and "no completion of the batch has a score" in warning
    )


# ------------------------------------------------------------------ 16: configuration bugs at start-up


class MisspelledHook(Plugin):
    name = "misspelled-hook"

    @hookimpl
    def rlvr_reward_function(self, register):
        pass


class Impostor(Plugin):
    name = "rloo"


@pytest.mark.parametrize(
    ("plugins", "temporary", "error", "culprits"),
    [
        ({"r1-acuracy": {}}, None, UnknownPluginError, ["'r1-acuracy'", "r1-accuracy"]),
        (
            {"misspelled-hook": {}},
            MisspelledHook,
            PluginValidationError,
            ["'misspelled-hook'", "rlvr_reward_function matches no hook spec", "did you mean 'rlvr_reward_functions'"],
        ),
        (
            {"r1-accuracy": {}, "grpo": {}, "rloo": {}},
            None,
            PluginConflictError,
            ["'grpo'", "'rloo'", "rlvr_compute_advantages"],
        ),
        ({"r1-accuracy": {}}, Impostor, PluginValidationError, ["duplicate plugin name 'rloo'", "rlvr-impostor"]),
    ],
    ids=["unknown-plugin", "misspelled-hook", "two-estimators", "duplicate-name"],
)
def test_16_config_bugs_fail_at_start_up_naming_the_culprit(tmp_path, plugins, temporary, error, culprits):
    config = {"output_dir": str(tmp_path / "run"), "plugins": plugins, "trainer": dict(TINY_TRAINER)}
    with temporary_plugin(temporary, "rlvr-impostor") if temporary else contextlib.nullcontext():
        with pytest.raises(error) as info:
            prepare(config)
    for culprit in culprits:
        assert culprit in str(info.value)


# 17 (a plugin that raises, or a metric logged, on one rank only): two processes are needed, so these live in
# tests/test_multiprocess.py (test_17_*, launched with torch.distributed.run under a 300 s watchdog): a reward
# failing on rank 1 only is masked there and both ranks go on; failing K times in a row stops both ranks with one
# error naming the reward and the rank (trainer._raise_on_every_rank); a metric logged on one rank only does not hang (the masked test);
# an observer hook raising on one rank stops both.


# ------------------------------------------------------------------ 18: hung plugins


def test_18_hung_plugins_are_killed_at_the_deadline_masked_and_the_next_call_succeeds():
    timeout = 1.0
    with RewardEngine(num_workers=1, timeout_s=timeout) as engine:
        assert engine.score("warm", fx.double, [{"x": 1}]).values == [2.0]
        for name, fn in (("sleeps", fx.sleep_if), ("big-integer", fx.big_power_if)):
            start = time.monotonic()
            result = engine.score(name, fn, [{"x": 1}, {"x": 2, "hang": True}])
            assert time.monotonic() - start < timeout + SLACK
            assert result.failed == [False, True] and result.values[0] == 1.0 and math.isnan(result.values[1])
            assert result.errors[1] == "timeout after 1s"
            assert engine.score(name, fn, [{"x": 3}]).values == [3.0]
        assert engine.stats["timeouts"] == 2 and engine.stats["workers_restarted"] == 2
