"""The fast commands (issue 26, item 6): ``rlvr plugins``, ``rlvr --help`` and ``rlvr train --check`` of a valid
config import neither torch nor TRL (nor transformers or datasets); the ``GRPOConfig`` that ``--check`` builds
without TRL is the one TRL builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "trl", "transformers", "datasets")

RUN_AND_LIST_HEAVY = """
import json, sys
from rlvr_plugins.cli.app import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": [m for m in HEAVY if m in sys.modules]}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def heavy_modules_imported(*argv: str) -> tuple[int, list[str]]:
    """Run ``rlvr ARGV`` in a fresh interpreter; its exit code and the heavy libraries it imported."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_HEAVY, *argv], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    last = done.stderr.strip().splitlines()[-1]
    result = json.loads(last)
    return result["code"], result["heavy"]


@pytest.mark.parametrize(
    "argv",
    [
        ["plugins"],
        ["plugins", "--json"],
        ["plugins", "--config", "configs/kimi.yaml"],
        ["--help"],
        ["train", "--help"],
    ],
    ids=" ".join,
)
def test_listing_and_help_import_no_torch_nor_trl(argv):
    assert heavy_modules_imported(*argv) == (0, [])


@pytest.mark.parametrize("config", ["configs/demo.yaml", "configs/kimi.yaml", "configs/dr_grpo.yaml"])
def test_check_of_a_valid_config_imports_no_torch_nor_trl(config, tmp_path):
    assert heavy_modules_imported("train", config, "--check", "--set", f"output_dir={tmp_path / 'run'}") == (0, [])


# -- the GRPOConfig of --check, without TRL, against TRL's --------------------------------------------

CPU = {"output_dir": "unused", "use_cpu": True, "bf16": False, "report_to": "none"}
DERIVED = ("generation_batch_size", "steps_per_generation", "scale_rewards", "do_eval", "num_generations")


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"num_generations": 4, "per_device_train_batch_size": 4},
        {"num_generations": 4, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4},
        {"num_generations": 4, "per_device_train_batch_size": 2, "generation_batch_size": 8},
        {"num_generations": 4, "per_device_train_batch_size": 2, "steps_per_generation": 6},
        {"scale_rewards": False},
        {"scale_rewards": True},
        {"scale_rewards": "batch"},
        {"eval_strategy": "steps", "eval_steps": 5, "num_generations": 4, "per_device_eval_batch_size": 4},
    ],
    ids=str,
)
def test_the_view_derives_what_grpo_config_derives(kwargs):
    from trl import GRPOConfig

    from rlvr_plugins.train.trl_fields import grpo_config_view

    real = GRPOConfig(**CPU, **kwargs)
    view = grpo_config_view({**CPU, **kwargs})
    assert {k: getattr(view, k) for k in DERIVED} == {k: getattr(real, k) for k in DERIVED}
    assert view.max_completion_length == real.max_completion_length and view.use_vllm == real.use_vllm


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_generations": 3},
        {"num_generations": 1, "per_device_train_batch_size": 1},
        {"generation_batch_size": 12, "per_device_train_batch_size": 8},
        {"generation_batch_size": 16, "steps_per_generation": 2},
        {"eval_strategy": "steps", "num_generations": 4, "per_device_eval_batch_size": 6},
        {"auto_find_batch_size": True},
        {"log_completions_hub_repo": "me/x"},
        {"vllm_importance_sampling_clip_min": 2.0, "vllm_importance_sampling_clip_max": 1.0},
    ],
    ids=str,
)
def test_the_view_refuses_what_grpo_config_refuses_with_its_message(kwargs):
    from trl import GRPOConfig

    from rlvr_plugins.train.trl_fields import grpo_config_view

    with pytest.raises(ValueError) as real:
        GRPOConfig(**CPU, **kwargs)
    with pytest.raises(ValueError) as view:
        grpo_config_view({**CPU, **kwargs})
    assert str(view.value) == str(real.value)


def test_the_defaults_table_is_trls():
    from rlvr_plugins.train import _trl_fields, trl_fields

    assert _trl_fields.GRPO_DEFAULTS == trl_fields.compute_defaults("GRPOConfig"), (
        "regenerate with: python -m rlvr_plugins.train.trl_fields"
    )


def test_check_refuses_trls_batch_rule_without_trl(tmp_path, capsys):
    from rlvr_plugins import cli

    smoke = REPO / "tests" / "configs" / "smoke.yaml"
    argv = ["train", str(smoke), "--check", "--set", "trainer.num_generations=3", "--set", f"output_dir={tmp_path}"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        "rlvr: error: invalid config: trainer: generation_batch_size (8) must be divisible by num_generations (3).\n"
    )
