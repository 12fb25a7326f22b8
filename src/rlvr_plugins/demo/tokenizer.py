"""Character-level tokenizer for the CPU demo.

Every character of the task alphabet is one token; the reasoning markers
``<think>``, ``</think>``, ``<answer>``, ``</answer>`` are single added tokens
(not special, so ``decode(..., skip_special_tokens=True)`` keeps them), and
``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` are special tokens. Encoding prepends
``<bos>``; nothing is appended (SFT and GRPO add ``<eos>`` themselves).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]
MARKER_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]

# Digits first, then arithmetic/punctuation, then letters: enough for the demo task
# and for simple variations of its prompt without growing the model.
ALPHABET = string.digits + "+-*/=()., :;?!'\"<>_" + "\n" + string.ascii_lowercase + string.ascii_uppercase


def build_char_tokenizer(
    alphabet: str = ALPHABET, markers: Sequence[str] = tuple(MARKER_TOKENS)
) -> PreTrainedTokenizerFast:
    """Build the demo's character-level tokenizer (deterministic, no downloads).

    ``markers``: the multi-character strings that are one (added, not special) token each.
    """
    chars = list(dict.fromkeys(alphabet))  # de-duplicate, keep order
    vocab: dict[str, int] = {}
    for tok in SPECIAL_TOKENS + list(markers) + chars:
        vocab.setdefault(tok, len(vocab))

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # One pre-token per character (markers are matched earlier, as added tokens).
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()  # concatenate, no spaces between characters
    bos_id = vocab[BOS]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    tok.add_special_tokens(SPECIAL_TOKENS)
    tok.add_tokens(list(markers))

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=512,
    )
    hf.chat_template = None
    return hf
