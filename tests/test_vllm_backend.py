"""The vLLM sampling backend's glue, against a stand-in ``vllm`` module that behaves as vLLM does
(a completion's ``token_ids`` end with the EOS that stopped it; ``tokenizer`` must name a folder or
hub id). Real vLLM is not needed."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

from transformers import AutoTokenizer

from rlvr_plugins.commands.sampling import SamplingOptions, sample
from rlvr_plugins.testing import char_tokenizer


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
