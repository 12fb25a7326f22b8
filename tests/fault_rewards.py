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


def math_verify_raising(*, prompt, completion, example):
    """A plugin that asks math-verify to raise: its 1 s timeout is then a TimeoutException (a BaseException)."""
    from math_verify import parse, verify

    gold = parse(example["answer"], parsing_timeout=1, raise_on_error=True)
    pred = parse(completion, parsing_timeout=1, raise_on_error=True)
    return float(verify(gold, pred, timeout_seconds=1, raise_on_error=True))


def address_space_limit_mb(*, prompt, completion, example):
    """The memory limit (RLIMIT_AS) of the process that scores, in MiB; -1 when unlimited."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return -1.0 if soft == resource.RLIM_INFINITY else soft / 2**20


def raise_on_odd_rows(*, prompt, completion, example):
    if example["rlvr_index"] % 2:
        raise ValueError(f"cannot score row {example['rlvr_index']}")
    return float(len(completion) % 3)


def nonfinite_on_odd_rows(*, prompt, completion, example):
    if example["rlvr_index"] % 2:
        return [float("nan"), float("inf"), float("-inf"), 1e30][example["rlvr_index"] // 2 % 4]
    return float(len(completion) % 3)


def none_on_odd_rows(*, prompt, completion, example):
    return None if example["rlvr_index"] % 2 else float(len(completion) % 3)


def always_none(*, prompt, completion, example):
    return None


def zero_one_or_035_by_row(*, prompt, completion, example):
    """The same value for every completion of a prompt: 0, 1 or 0.35 by row."""
    return (0.0, 1.0, 0.35)[example["rlvr_index"] % 3]


def always_wrong(*, prompt, completion, example):
    return 0.0


def text_length(*, prompt, completion, example):
    return float(len(completion))


def logs_the_whole_input(*, prompt, completion, example):
    """Logs its whole input, as math-verify does on a parse timeout, plus a traceback with it in."""
    import logging
    import warnings

    log = logging.getLogger("some.third.party")
    log.warning("Timeout during parsing: %s", completion)
    try:
        raise ValueError(completion)
    except ValueError:
        log.exception("failed on")
    warnings.warn(f"cannot parse {completion}", stacklevel=2)
    print("printed:", completion, "\nnext line")
    return 1.0


def half_failing(*, prompt, completion, example):
    if example["i"] % 2:
        raise ValueError(f"odd row {example['i']}")
    return 1.0
