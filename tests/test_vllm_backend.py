"""The vLLM sampling backend's glue, against a stand-in ``vllm`` module that behaves as vLLM does
(a completion's ``token_ids`` end with the EOS that stopped it; ``tokenizer`` must name a folder or
hub id). Real vLLM is not needed."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
from transformers import AutoTokenizer

from rlvr_plugins.testing import char_tokenizer
from rlvr_plugins.train.sampling import SamplingOptions, sample


@dataclass
class Output:
    text: str
    token_ids: list[int]


def fake_vllm(seen: dict) -> types.ModuleType:
    class LLM:
        def __init__(self, model, tokenizer, **kwargs):
            seen["model"], seen["tokenizer"] = model, tokenizer
            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)  # as vLLM: a name, never an object

        def get_tokenizer(self):
            return self.tokenizer

        def generate(self, prompts, params):
            ids = self.tokenizer("12", add_special_tokens=False)["input_ids"]
            stopped = Output("12", ids + [self.tokenizer.eos_token_id])  # stopped by EOS: vLLM keeps it
            cut = Output("123", self.tokenizer("123", add_special_tokens=False)["input_ids"])  # max_tokens reached
            return [types.SimpleNamespace(outputs=[stopped, cut]) for _ in prompts]

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, lambda **kw: kw
    return module


def test_vllm_lengths_stop_before_eos_and_the_char_tokenizer_is_handed_over_as_a_folder(tmp_path, monkeypatch):
    seen: dict = {}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(seen))
    config = {"model": {"name_or_path": str(tmp_path / "policy"), "tokenizer": "char"}}
    (samples,) = sample(["1+1="], SamplingOptions(n=2, backend="vllm", max_new_tokens=3), config=config)
    assert [(s.text, s.length) for s in samples] == [("12", 2), ("123", 3)]  # was 3 and 3: EOS counted
    assert seen["model"] == str(tmp_path / "policy")
    assert seen["tokenizer"] != "char"  # was the hub name "char" (fails offline after a minute)
    assert AutoTokenizer.from_pretrained(seen["tokenizer"]).get_vocab() == char_tokenizer().get_vocab()


def test_vllm_gets_a_named_tokenizer_as_it_is(tmp_path, monkeypatch):
    seen: dict = {}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(seen))
    folder = tmp_path / "tok"
    char_tokenizer().save_pretrained(folder)
    sample(["1+1="], SamplingOptions(backend="vllm"), config={"model": {"name_or_path": str(folder)}})
    assert seen["tokenizer"] == str(folder)


HEAD_16 = (
    "trainer.use_vllm: the model's head_dim is 16, but vLLM on the CPU supports head sizes 32, 64, 80, 96, 112, "
    "128, 160, 192, 224, 256, 512; set model.tiny.head_dim to one of them, or do not use vLLM"
)


def test_a_head_size_vllm_cpu_lacks_is_named_at_start_up():
    from rlvr_plugins.train.modeling import vllm_cpu_problem

    assert vllm_cpu_problem({"model": {"tiny": {"head_dim": 16}}}, "trainer.use_vllm", has_gpu=False) == HEAD_16
    assert vllm_cpu_problem({"model": {"tiny": {"head_dim": 16}}}, "trainer.use_vllm", has_gpu=True) is None
    for size in (32, 64, 80, 128):
        assert vllm_cpu_problem({"model": {"tiny": {"head_dim": size}}}, "x", has_gpu=False) is None
    assert vllm_cpu_problem({"model": {"tiny": {}}}, "x", has_gpu=False) is None  # the demo model's 32
    assert vllm_cpu_problem({"model": {"name_or_path": "Qwen/Qwen3-0.6B"}}, "x", has_gpu=False) is None  # not read


def test_a_folder_models_head_size_comes_from_its_config_json(tmp_path):
    import json

    from rlvr_plugins.train.modeling import head_dim

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 320, "num_attention_heads": 4}))
    assert head_dim({"model": {"name_or_path": str(tmp_path)}}) == 80
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 2, "head_dim": 16}))
    assert head_dim({"model": {"name_or_path": str(tmp_path)}}) == 16


def test_rlvr_train_check_with_use_vllm_on_the_cpu_recipe_exits_2(capsys, monkeypatch):
    from pathlib import Path

    from rlvr_plugins import cli

    pytest.importorskip("rlvr_kimi")
    monkeypatch.setattr("rlvr_plugins.train.run.has_accelerator", lambda import_torch=True: False)
    kimi = Path(__file__).resolve().parents[1] / "configs" / "cpu" / "kimi.yaml"
    assert cli.main(["train", str(kimi), "--check", "--set", "trainer.use_vllm=true"]) == 2
    assert HEAD_16 in capsys.readouterr().err


def test_the_char_tokenizer_saved_with_the_model_is_the_model_folder(tmp_path, monkeypatch):
    seen: dict = {}
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(seen))
    char_tokenizer().save_pretrained(tmp_path)
    sample(
        ["1+1="],
        SamplingOptions(backend="vllm"),
        config={"model": {"name_or_path": str(tmp_path), "tokenizer": "char"}},
    )
    assert seen["tokenizer"] == str(tmp_path)


def platform_module(cpu: bool) -> types.ModuleType:
    module = types.ModuleType("vllm.platforms")
    module.current_platform = types.SimpleNamespace(is_cpu=lambda: cpu)
    return module


@pytest.mark.parametrize(
    "cpu, use_vllm, mode, installed",
    [
        (True, True, "colocate", True),
        (False, True, "colocate", False),  # on a GPU the sync stays TRL's
        (True, True, "server", False),
        (True, False, "colocate", False),
    ],
)
def test_the_cpu_weight_sync_replaces_trls_only_for_a_colocated_vllm_on_the_cpu(
    monkeypatch, cpu, use_vllm, mode, installed
):
    from rlvr_plugins import vllm_cpu

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", platform_module(cpu))
    trls = object()
    generation = types.SimpleNamespace(sync_weights=trls)
    trainer = types.SimpleNamespace(
        use_vllm=use_vllm, args=types.SimpleNamespace(vllm_mode=mode), vllm_generation=generation
    )
    calls = []
    monkeypatch.setattr(vllm_cpu, "sync_weights_on_cpu", calls.append)
    assert vllm_cpu.install_cpu_weight_sync(trainer) is installed
    if installed:
        generation.sync_weights()
        assert calls == [generation]
    else:
        assert generation.sync_weights is trls
