"""``generate_with_budget`` on a scripted model (exact token ids), and on a real tiny model (structure)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from rlvr_qwen_thinking.budget import EARLY_STOP_TEXT, generate_with_budget

BLOCK = "<think>\n\n</think>\n\n"


class ScriptedLM:
    """A deterministic stand-in for a causal LM, driven by the prompt ``"<d>="``.

    Before any ``</think>`` it writes ``<think>``, then ``d`` tokens ``x``, then ``</think>``
    (``d`` = the character before the last ``=``; ``e`` means EOS at once). After a
    ``</think>`` it writes ``<answer>7</answer>`` then EOS, ignoring ``.`` and newlines that
    follow the ``</think>`` (so it continues the same way after the early-stop text).
    ``generate`` honours left padding, ``max_new_tokens``, ``eos_token_id`` and ``pad_token_id``.
    """

    device = torch.device("cpu")

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.id = lambda s: tokenizer.convert_tokens_to_ids(s)
        self.calls = []

    def next_token(self, prefix):
        eos, end = self.tok.eos_token_id, self.id("</think>")
        if end in prefix:
            after = prefix[len(prefix) - prefix[::-1].index(end) :]
            j = sum(t not in (self.id("."), self.id("\n")) for t in after)
            answer = [self.id("<answer>"), self.id("7"), self.id("</answer>"), eos]
            return answer[j] if j < len(answer) else eos
        equals = len(prefix) - 1 - prefix[::-1].index(self.id("="))
        written = len(prefix) - equals - 1
        d = self.tok.convert_ids_to_tokens(prefix[equals - 1])
        if d == "e":
            return eos
        intended = [self.id("<think>")] + [self.id("x")] * int(d) + [end]
        return intended[written] if written < len(intended) else eos

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **sampling):
        self.calls.append({"rows": input_ids.shape[0], "max_new_tokens": max_new_tokens, "eos": list(eos_token_id)})
        outs = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            prefix = [t for t, m in zip(ids, mask) if m]
            new = []
            while len(new) < max_new_tokens:
                new.append(self.next_token(prefix + new))
                if new[-1] in eos_token_id:
                    break
            outs.append(new)
        width = max(len(o) for o in outs)
        return torch.cat([input_ids, torch.tensor([o + [pad_token_id] * (width - len(o)) for o in outs])], dim=1)


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_budget_cuts_at_n_thinking_tokens_injects_the_stop_text_and_masks_it(tokenizer):
    model = ScriptedLM(tokenizer)
    stop = ids(tokenizer, EARLY_STOP_TEXT)
    assert len(stop) == 110  # 117 characters, "</think>" is one token
    t = {s: tokenizer.convert_tokens_to_ids(s) for s in ("<think>", "</think>", "<answer>", "</answer>", "x", "7")}
    eos = tokenizer.eos_token_id
    answer = [t["<answer>"], t["7"], t["</answer>"], eos]
    prompts = [tokenizer(p)["input_ids"] for p in ("2=", "3=", "4=", "9=", "e=")]
    completions, masks = generate_with_budget(model, tokenizer, prompts, budget=5, max_new_tokens=5 + 110 + 10)

    # closes </think> before the budget (4 tokens) or exactly at it (5 tokens): untouched
    assert completions[0] == [t["<think>"], t["x"], t["x"], t["</think>"], *answer] and masks[0] == [1] * 8
    assert completions[1] == [t["<think>"], t["x"], t["x"], t["x"], t["</think>"], *answer] and masks[1] == [1] * 9
    # still thinking after 5 tokens: cut there, stop text injected (mask 0), then the model answers
    cut = [t["<think>"], t["x"], t["x"], t["x"], t["x"]]
    for row in (2, 3):
        assert completions[row] == cut + stop + answer
        assert masks[row] == [1] * 5 + [0] * 110 + [1] * 4
    # EOS during thinking ends the row
    assert completions[4] == [eos] and masks[4] == [1]
    # phase 1: all rows, at most `budget` tokens, stopping at EOS or </think>; phase 2: the 4 open rows, EOS
    # only, for the most tokens any row has left (row "2=" closed after 4 of its 125)
    assert model.calls == [
        {"rows": 5, "max_new_tokens": 5, "eos": [eos, t["</think>"]]},
        {"rows": 4, "max_new_tokens": 125 - 4, "eos": [eos]},
    ]


def test_the_answer_is_cut_where_max_new_tokens_ends(tokenizer):
    model = ScriptedLM(tokenizer)
    stop = ids(tokenizer, EARLY_STOP_TEXT)
    prompts = [tokenizer(p)["input_ids"] for p in ("9=", "2=")]
    completions, masks = generate_with_budget(model, tokenizer, prompts, budget=5, max_new_tokens=5 + 110 + 2)
    t = {s: tokenizer.convert_tokens_to_ids(s) for s in ("<think>", "</think>", "<answer>", "x", "7")}
    assert completions[0] == [t["<think>"]] + [t["x"]] * 4 + stop + [t["<answer>"], t["7"]]
    assert masks[0] == [1] * 5 + [0] * 110 + [1, 1]
    assert len(completions[1]) == 8 and masks[1] == [1] * 8  # fits: untouched


def test_rows_outside_the_budget_skip_phase_one(tokenizer):
    model = ScriptedLM(tokenizer)
    prompts = [tokenizer(p)["input_ids"] for p in ("9= /no_think" + BLOCK, "9=")]
    completions, masks = generate_with_budget(
        model, tokenizer, prompts, budget=2, max_new_tokens=2 + 110 + 6, apply_budget=[False, True]
    )
    t = {s: tokenizer.convert_tokens_to_ids(s) for s in ("<think>", "<answer>", "</answer>", "x", "7")}
    assert completions[0] == [t["<answer>"], t["7"], t["</answer>"], tokenizer.eos_token_id] and masks[0] == [1] * 4
    assert completions[1][:2] == [t["<think>"], t["x"]] and masks[1] == [1] * 2 + [0] * 110 + [1] * 4
    assert model.calls[0]["rows"] == 1


def test_no_room_for_the_answer_or_a_multi_token_think_end_is_an_error(tokenizer):
    model = ScriptedLM(tokenizer)
    with pytest.raises(ValueError, match=r"thinking budget 5 \+ the early-stop text \(110 tokens\) leaves no room"):
        generate_with_budget(model, tokenizer, [[1, 2]], budget=5, max_new_tokens=115)

    class CharsOnly:
        eos_token_id = pad_token_id = 0

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": [ord(c) for c in text]}

    with pytest.raises(ValueError, match="needs '</think>' to be a single token"):
        generate_with_budget(model, CharsOnly(), [[1, 2]], budget=5, max_new_tokens=500)


def test_real_tiny_model_sampling_keeps_the_structure(tokenizer, tiny_model):
    model = tiny_model
    stop = ids(tokenizer, EARLY_STOP_TEXT)
    end, eos = tokenizer.convert_tokens_to_ids("</think>"), tokenizer.eos_token_id
    prompts = [tokenizer(p)["input_ids"] for p in ("12+7=", "3+4=", "55+66=", "9+9=")] * 2
    torch.manual_seed(0)
    completions, masks = generate_with_budget(
        model,
        tokenizer,
        prompts,
        budget=3,
        max_new_tokens=3 + 110 + 5,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
    )
    injected = 0
    for completion, mask in zip(completions, masks):
        assert len(completion) == len(mask) <= 118
        head = completion[:3]
        if 0 in mask:
            injected += 1
            assert mask == [1] * 3 + [0] * 110 + [1] * (len(mask) - 113)
            assert completion[3:113] == stop and end not in head and eos not in head
        else:
            assert mask == [1] * len(completion) and (end in head or eos in head)
    assert injected >= 1


class ScriptedVLLM:
    """A stand-in for ``vllm.LLM`` writing ScriptedLM's tokens as vLLM does: a stop token is kept at the
    end of ``token_ids``, and each token's logprob is ``-(its position + 1) / 10`` (NaN at position 2)."""

    def __init__(self, scripted):
        self.scripted, self.params = scripted, []

    def generate(self, prompts, params, use_tqdm=True):
        self.params.append(params)
        outputs = []
        for prompt in prompts:
            prefix, new = prompt["prompt_token_ids"], []
            while len(new) < params["max_tokens"]:
                new.append(self.scripted.next_token(prefix + new))
                if new[-1] in params["stop_token_ids"] or new[-1] == self.scripted.tok.eos_token_id:
                    break
            logprobs = [
                {t: types.SimpleNamespace(logprob=float("nan") if k == 2 else -(k + 1) / 10)} for k, t in enumerate(new)
            ]
            outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=new, logprobs=logprobs)]))
        return outputs


def test_two_phases_with_vllm_give_the_transformers_completions_and_vllms_logprobs(tokenizer, monkeypatch):
    from rlvr_qwen_thinking.budget import two_phase_budget, vllm_generate

    vllm = types.ModuleType("vllm")
    vllm.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    prompts = [tokenizer(p)["input_ids"] for p in ("2=", "9=", "e=")]
    expected = generate_with_budget(ScriptedLM(tokenizer), tokenizer, prompts, budget=5, max_new_tokens=125)
    llm = ScriptedVLLM(ScriptedLM(tokenizer))
    completions, masks, logprobs = two_phase_budget(
        vllm_generate(llm, {"temperature": 1.0, "logprobs": 0}), tokenizer, prompts, budget=5, max_new_tokens=125
    )
    assert (completions, masks) == expected
    phase = [-0.1, -0.2, None, -0.4, -0.5]  # NaN comes back as None, as TRL's extract_logprobs does
    assert logprobs[0] == phase[:4] + [-0.1, -0.2, None, -0.4]  # closed at 4 tokens, then the answer's 4
    assert logprobs[1] == phase + [None] * 110 + [-0.1, -0.2, None, -0.4]  # the injected text is not the policy's
    assert logprobs[2] == [-0.1]
    end, eos = tokenizer.convert_tokens_to_ids("</think>"), tokenizer.eos_token_id
    assert [(p["n"], p["max_tokens"], p["stop_token_ids"], p["temperature"]) for p in llm.params] == [
        (1, 5, [eos, end], 1.0),
        (1, 125 - 4, [eos], 1.0),
    ]
