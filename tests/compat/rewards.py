"""The reward functions of the compat scenarios that also run in the reward engine's worker processes
(``isolate_reward_funcs=True``). A worker imports a function's module to call it: this one imports neither
torch nor TRL, so a worker starts in a fraction of a second instead of the test module's ~5 CPU-s."""

from __future__ import annotations

import os
import time


def text(completion) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def length_mod_3(completions, **kwargs):
    return [float(len(text(c)) % 3) for c in completions]


def vowel_count(completions, **kwargs):
    return [float(sum(ch in "aeiouAEIOU" for ch in text(c))) for c in completions]


def raising_reward(completions, **kwargs):
    raise ZeroDivisionError("reward bug")


def batch_logging_reward(completions, trainer_state, log_metric, log_extra, **kwargs):
    log_metric("custom/calls_in_worker", float(os.getpid() != int(kwargs["parent_pid"][0])))
    log_extra("step", [trainer_state.global_step] * len(completions))
    return length_mod_3(completions)


def slow_reward(completions, **kwargs):
    time.sleep(30)
    return length_mod_3(completions)
