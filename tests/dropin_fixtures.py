"""Reward functions for test_dropin.py; module-level so the engine's workers import them by reference."""

from __future__ import annotations

import asyncio


def with_every_extra(*, prompt, completion, example, completion_ids, trainer_state, log_metric, log_extra):
    log_metric("ids/len", len(completion_ids))
    log_extra("step_seen", trainer_state.global_step)
    return float(len(completion_ids) + len(trainer_state.log_history))


def only_ids(*, prompt, completion, example, completion_ids):
    return float(sum(completion_ids))


def completion_kind(*, prompt, completion, example):
    return 1.0 if isinstance(completion, list) else 0.0


async def async_length(*, prompt, completion, example):
    await asyncio.sleep(0)
    return float(len(completion))


def raises_on_b(*, prompt, completion, example):
    if completion == "b":
        raise KeyError("no b")
    return 1.0


def hangs_on_b(*, prompt, completion, example):
    if completion == "b":
        import time

        time.sleep(60)
    return 1.0
