"""Reward functions that misbehave, in a module light enough for engine workers to import quickly."""

import time


def hang_on_odd_rows(*, prompt, completion, example):
    if example["rlvr_index"] % 2:
        time.sleep(60)
    return float(len(completion) % 3)


def always_raises(*, prompt, completion, example):
    raise ValueError("broken plugin")


def returns_text(*, prompt, completion, example):
    return "0.5"


def returns_nan(*, prompt, completion, example):
    return float("nan")
