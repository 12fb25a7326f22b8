"""``kimi-curriculum`` inside real GRPO runs on a tiny model: exact resume, prefetch lag, metrics."""

from __future__ import annotations

import json

import pytest

from rlvr_plugins import Plugin, hookimpl
from rlvr_plugins.manager import temporary_plugin
from rlvr_plugins.testing import char_tokenizer, reward_plugin_class, tiny_model, tiny_rows

TRAINER = {
    "per_device_train_batch_size": 8,
    "num_generations": 4,
    "max_completion_length": 8,
    "learning_rate": 1e-3,
    "use_cpu": True,
    "disable_tqdm": True,
    "beta": 0.0,
    "report_to": "none",
}


def has_digit(*, prompt, completion, example):
    """Correct = the completion contains a digit: depends on the sampled text, so groups are mixed."""
    return 1.0 if any(c.isdigit() for c in completion) else 0.0


class Recorder(Plugin):
    """Records the prompt ids of every scored batch, and how far the sampler (``curriculum``) has drawn then."""

    name = "kimi-cur-test-recorder"

    def __init__(self, options=None):
        super().__init__(options)
        self.seen: list = []
        self.curriculum = None

    @hookimpl
    def rlvr_on_rewards(self, example_indices, num_generations, step):
        state = self.curriculum.state
        self.seen.append(
            {"step": step, "ids": example_indices[::num_generations], "chunk": state.observed, "drawn": state.drawn}
        )


def build(tmp_path, *, rows=8, seed=7, callbacks=(), curriculum=None, **trainer):
    from datasets import Dataset

    from rlvr_plugins.rewards import Engines
    from rlvr_plugins.train.run import prepare
    from rlvr_plugins.trainer import RLVRTrainer

    plugins = {
        "kimi-cur-test-correct": {},
        "kimi-cur-test-recorder": {},
        "kimi-curriculum": {
            "correctness_reward": "kimi-cur-test-correct",
            "full_at_step": 4,
            "start_quantile": 0.5,
            **(curriculum or {}),
        },
    }
    config = {
        "output_dir": str(tmp_path / "run"),
        "seed": seed,
        "plugins": plugins,
        "trainer": {**TRAINER, "save_strategy": "no", **trainer},
    }
    with (
        temporary_plugin(reward_plugin_class("kimi-cur-test-correct", has_digit, isolated=False)),
        temporary_plugin(Recorder),
    ):
        prepared = prepare(config)
    tokenizer = char_tokenizer()
    trainer = RLVRTrainer(
        plugin_set=prepared.plugin_set,
        engines=Engines(in_process=True),
        model=tiny_model(tokenizer),
        args=prepared.grpo_args,
        train_dataset=Dataset.from_list(tiny_rows(rows)),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    recorder(trainer).curriculum = trainer.plugin_set.get("kimi-curriculum")
    return trainer


def recorder(trainer) -> Recorder:
    return trainer.plugin_set.get(Recorder.name)


def stop_after(step):
    from transformers import TrainerCallback

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= step:
                control.should_training_stop = True

    return Stop()


@pytest.mark.slow
def test_resumed_run_draws_exactly_the_uninterrupted_sequence(tmp_path):
    """Run A trains 6 steps; run B is interrupted right after checkpoint-3 and resumed to step 6.

    8 prompts, 2 per batch: an epoch is 4 steps, so the resumed part crosses an epoch
    boundary. Trainer and TRL defaults (data skip on resume, linear LR decay over
    max_steps=6, prefetching dataloader); run B's interruption is a callback, so both runs
    have the same config and thus the same LR schedule.
    """
    settings = {
        "max_steps": 6,
        "save_strategy": "steps",
        "save_steps": 3,
        "seed": 1,
        "curriculum": {"prior_strength": 0.0},
    }
    a = build(tmp_path / "a", **settings)
    a.train()
    seen_a, state_a = recorder(a).seen, recorder(a).curriculum.state

    b = build(tmp_path / "b", callbacks=[stop_after(3)], **settings)
    b.train()
    assert b.state.global_step == 3 and [r["step"] for r in recorder(b).seen] == [0, 1, 2]
    saved = json.loads((tmp_path / "b" / "run" / "checkpoint-3" / "rlvr_plugin_state.json").read_text())
    # the dataloader had already drawn chunk 3 when checkpoint-3 was written: it is saved, not redrawn
    assert saved["kimi-curriculum"]["observed"] == 3 and list(saved["kimi-curriculum"]["pending"]) == ["3"]
    first_b = recorder(b).seen

    resumed = build(tmp_path / "b", **settings)
    resumed.train(resume_from_checkpoint=str(tmp_path / "b" / "run" / "checkpoint-3"))
    seen_b = first_b + recorder(resumed).seen

    assert [r["step"] for r in seen_a] == [0, 1, 2, 3, 4, 5]
    assert [r["step"] for r in seen_b] == [0, 1, 2, 3, 4, 5]
    assert [r["ids"] for r in seen_b] == [r["ids"] for r in seen_a]
    assert [r["chunk"] for r in seen_a] == [0, 1, 2, 3, 4, 5]
    state_b = recorder(resumed).curriculum.state
    # not vacuous: chunk 3, drawn afresh from the statistics at checkpoint-3, would differ from the saved one
    from rlvr_kimi.sampler import CurriculumState

    sampler = recorder(resumed).curriculum.sampler
    sampler.state = CurriculumState.from_dict(saved["kimi-curriculum"], 8)
    assert sampler.draw(3) != saved["kimi-curriculum"]["pending"]["3"]
    assert state_b.to_dict() == state_a.to_dict()
    assert sum(state_a.attempts) == 6 * 2 * 4  # 6 batches of 2 prompts x 4 completions, all scored
    # the prefetch lag: when the rewards of chunk k arrive, chunk k+1 has already been drawn
    assert [r["drawn"] - 1 - r["chunk"] for r in seen_a] == [1, 1, 1, 0, 1, 1]
    logged = [h["curriculum/draw_lead"] for h in a.state.log_history if "curriculum/draw_lead" in h]
    assert logged == [1, 1, 1, 0, 1, 1]


@pytest.mark.slow
def test_demo_run_with_kimi_length_and_kimi_curriculum_logs_curriculum_metrics(tmp_path):
    """``rlvr train tests/configs/smoke.yaml`` with both Kimi plugins (SFT and evals left out for time)."""
    from pathlib import Path

    from rlvr_plugins import cli

    smoke = Path(__file__).resolve().parents[3] / "tests" / "configs" / "smoke.yaml"
    out = tmp_path / "run"
    code = cli.main(
        [
            "train",
            str(smoke),
            "--set",
            f"output_dir={out}",
            "--set",
            "plugins.kimi-length={}",
            "--set",
            "plugins.kimi-curriculum={full_at_step: 2}",
            "--set",
            "sft=null",
            "--set",
            "eval=null",
            "--set",
            "data.eval=null",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "curriculum/admitted_prompts" in r]
    assert [r["step"] for r in rows] == [1, 2]
    bins = ["0.0-0.2", "0.2-0.4", "0.4-0.6", "0.6-0.8", "0.8-1.0"]
    for r in rows:
        assert "penalties/kimi-length/mean" in r and r["curriculum/draw_lead"] == 1
        assert sum(r[f"curriculum/success_hist/{b}"] for b in bins) == pytest.approx(1.0)
        assert 0 <= r["curriculum/zero_variance_share"] <= 1
    # 48 synthetic prompts of difficulty 1 or 2: step 0 admits ceil(0.25 * 48) = 12 -> every difficulty-1 prompt
    difficulty_one = rows[0]["curriculum/admitted_prompts"]
    assert rows[0]["curriculum/admitted_difficulty"] == 1 and 12 <= difficulty_one < 48
    assert rows[1]["curriculum/admitted_prompts"] == 48 and rows[1]["curriculum/admitted_difficulty"] == 2
    plugins = json.loads((out / "plugins.json").read_text())
    assert [p["name"] for p in plugins["plugins"]][-3:] == ["kimi-curriculum", "grpo", "plain-template"]
    saved = json.loads((out / "checkpoint-2" / "rlvr_plugin_state.json").read_text())["kimi-curriculum"]
    assert saved["observed"] == 2 and sum(saved["attempts"]) == 2 * 2 * 4
