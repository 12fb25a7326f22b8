"""CPU demo pieces: a character-level tokenizer, a synthetic arithmetic task, a tiny model, greedy evaluation."""
