"""What ``accelerate launch`` hands the project (its ``ACCELERATE_*`` variables), checked before a model loads.

The DeepSpeed runs themselves are in tests/test_deepspeed.py (skipped without deepspeed);
these need neither deepspeed nor a second process.
"""

from __future__ import annotations

import pytest

from rlvr_plugins import cli
from rlvr_plugins.train.modeling import full_weights, launch_problem

ZERO2_BF16 = {
    "ACCELERATE_USE_DEEPSPEED": "true",
    "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2",
    "ACCELERATE_MIXED_PRECISION": "bf16",
}
ZERO3 = {
    "ACCELERATE_USE_DEEPSPEED": "true",
    "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
    "ACCELERATE_MIXED_PRECISION": "no",
    "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "true",
}


def test_bf16_deepspeed_without_a_gpu_is_named_with_the_cpu_configs():
    problem = launch_problem({"bf16": False}, ZERO2_BF16, has_gpu=False)
    assert problem.startswith("accelerate launch asks DeepSpeed for mixed_precision: bf16, but no GPU is visible")
    assert "configs/accelerate/cpu/zero2.yaml" in problem
    assert launch_problem({"bf16": False}, {**ZERO2_BF16, "ACCELERATE_MIXED_PRECISION": "fp16"}, False).startswith(
        "accelerate launch asks DeepSpeed for mixed_precision: fp16"
    )


@pytest.mark.parametrize(
    "kwargs, env, has_gpu",
    [
        ({"bf16": False}, ZERO2_BF16, True),  # a GPU: DeepSpeed's own bf16 applies
        ({"bf16": True}, ZERO2_BF16, False),  # bf16 asked for on the CPU too: consistent
        ({"bf16": False}, {**ZERO2_BF16, "ACCELERATE_USE_DEEPSPEED": "false"}, False),  # DDP: accelerate's autocast
        ({"bf16": False}, {}, False),  # plain python / torchrun
        ({"bf16": False}, ZERO3, False),
    ],
)
def test_launches_that_work_have_no_problem(kwargs, env, has_gpu):
    assert launch_problem(kwargs, env, has_gpu) is None


def test_zero3_without_the_16bit_save_would_save_shards_and_is_refused():
    env = {**ZERO3, "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": "false"}
    assert launch_problem({}, env, has_gpu=True) == (
        "accelerate launch runs DeepSpeed ZeRO-3 without zero3_save_16bit_model: true, so the saved model would be "
        "DeepSpeed shards that from_pretrained cannot load; set zero3_save_16bit_model: true "
        "(as configs/accelerate/zero3.yaml does)"
    )
    assert launch_problem({}, {k: v for k, v in env.items() if "16BIT" not in k}, True) is not None


def test_rlvr_train_under_a_bf16_deepspeed_launch_on_the_cpu_exits_2_before_loading(tmp_path, monkeypatch, capsys):
    pytest.importorskip("rlvr_r1")
    monkeypatch.setattr("rlvr_plugins.train.modeling.has_accelerator", lambda import_torch=True: False)
    for key, value in ZERO2_BF16.items():
        monkeypatch.setenv(key, value)
    from pathlib import Path

    smoke = Path(__file__).parent / "configs" / "smoke.yaml"
    assert cli.main(["train", str(smoke), "--set", f"output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert "accelerate launch asks DeepSpeed for mixed_precision: bf16" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_full_weights_is_a_no_op_for_a_model_zero3_did_not_partition():
    from rlvr_plugins.testing import char_tokenizer, tiny_model

    model = tiny_model(char_tokenizer())
    with full_weights(model) as gathered:
        assert gathered is model


def test_every_rng_is_reseeded_when_training_begins():
    import random

    import torch

    from rlvr_plugins.train.runlog import SeedAtTrainBegin

    class Args:
        seed = 11

    torch.manual_seed(11)
    random.seed(11)
    expected = (torch.rand(3).tolist(), random.random())
    torch.rand(5)  # a backend's loading draws random numbers
    SeedAtTrainBegin().on_train_begin(Args(), None, None)
    assert (torch.rand(3).tolist(), random.random()) == expected
